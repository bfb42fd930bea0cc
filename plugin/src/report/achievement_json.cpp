#include "report/achievement_json.h"

#include "base/json_number.h"
#include "report/json_helpers.h"

namespace fathom::detail {

using nlohmann::json;

namespace {

json unmeasured_list(const std::vector<Unmeasured>& v) {
  json out = json::array();
  for (const Unmeasured& u : v) out.push_back(unmeasured_json(u));
  return out;
}

std::vector<Unmeasured> unmeasured_list_from(const json& j) {
  std::vector<Unmeasured> out;
  if (auto it = j.find("not_measured"); it != j.end())
    for (const json& u : *it) out.push_back(unmeasured_from(u));
  return out;
}

}  // namespace

json flops_json(const std::optional<FlopsSummary>& f) {
  if (!f) return nullptr;
  json by_op = json::array(), achieved = json::array();
  for (const OpFlops& o : f->by_op)
    by_op.push_back({{"phase", o.phase},
                     {"op", o.op},
                     {"dtype", o.dtype},
                     {"calls", o.calls},
                     {"flops", o.flops}});
  for (const PhaseThroughput& p : f->achieved)
    achieved.push_back({{"phase", p.phase},
                        {"flops_per_step", p.flops_per_step},
                        {"seconds_per_step", p.seconds_per_step},
                        {"time_source", p.time_source},
                        {"flops_per_s", optional_json(p.flops_per_s)},
                        {"mfu", optional_json(p.mfu)}});
  return {{"profiled_steps", f->profiled_steps},
          {"per_step", f->per_step},
          {"forward", f->forward},
          {"backward", f->backward},
          {"dominant_dtype", f->dominant_dtype},
          {"by_op", by_op},
          {"achieved", achieved},
          {"step_flops_per_s", optional_json(f->step_flops_per_s)},
          {"peak_flops_per_s", optional_json(f->peak_flops_per_s)},
          {"peak", f->peak},
          {"mfu", optional_json(f->mfu)},
          {"not_measured", unmeasured_list(f->not_measured)}};
}

std::optional<FlopsSummary> flops_from(const json& epoch) {
  auto it = epoch.find("flops");
  if (it == epoch.end() || it->is_null()) return std::nullopt;
  const json& j = *it;
  FlopsSummary f;
  f.profiled_steps = detail::json_integer<std::int64_t>(j.at("profiled_steps"));
  f.per_step = j.at("per_step").get<double>();
  f.forward = j.at("forward").get<double>();
  f.backward = j.at("backward").get<double>();
  f.dominant_dtype = j.at("dominant_dtype").get<std::string>();
  for (const json& o : j.at("by_op"))
    f.by_op.push_back({o.at("phase").get<std::string>(), o.at("op").get<std::string>(),
                       o.at("dtype").get<std::string>(), o.at("calls").get<double>(),
                       o.at("flops").get<double>()});
  for (const json& p : j.at("achieved"))
    f.achieved.push_back(
        {p.at("phase").get<std::string>(), p.at("flops_per_step").get<double>(),
         p.at("seconds_per_step").get<double>(), p.at("time_source").get<std::string>(),
         optional_from<double>(p, "flops_per_s"), optional_from<double>(p, "mfu")});
  f.step_flops_per_s = optional_from<double>(j, "step_flops_per_s");
  f.peak_flops_per_s = optional_from<double>(j, "peak_flops_per_s");
  f.peak = j.at("peak").get<std::string>();
  f.mfu = optional_from<double>(j, "mfu");
  f.not_measured = unmeasured_list_from(j);
  return f;
}

json energy_json(const std::optional<EnergySummary>& e) {
  if (!e) return nullptr;
  return {{"source", e->source},
          {"epoch_j", optional_json(e->epoch_j)},
          {"per_step_j", optional_json(e->per_step_j)},
          {"per_sample_j", optional_json(e->per_sample_j)},
          {"average_w", optional_json(e->average_w)},
          {"not_measured", unmeasured_list(e->not_measured)}};
}

std::optional<EnergySummary> energy_from(const json& epoch) {
  auto it = epoch.find("energy");
  if (it == epoch.end() || it->is_null()) return std::nullopt;
  const json& j = *it;
  EnergySummary e;
  e.source = j.at("source").get<std::string>();
  e.epoch_j = optional_from<double>(j, "epoch_j");
  e.per_step_j = optional_from<double>(j, "per_step_j");
  e.per_sample_j = optional_from<double>(j, "per_sample_j");
  e.average_w = optional_from<double>(j, "average_w");
  e.not_measured = unmeasured_list_from(j);
  return e;
}

}  // namespace fathom::detail
