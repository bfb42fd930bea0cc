#include "report/module_report_writers.h"

#include <fathom/checkpoint_planner.h>
#include <fathom/error.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "base/bytes_text.h"
#include "base/json_number.h"
#include "report/activation_plan_writers.h"
#include "report/json_helpers.h"

namespace fathom::detail {
namespace {

using nlohmann::json;

json segments_json(const std::vector<CheckpointSegment>& segments) {
  json out = json::array();
  for (const CheckpointSegment& s : segments) out.push_back(json::array({s.begin, s.end}));
  return out;
}

std::vector<CheckpointSegment> segments_from(const json& j) {
  std::vector<CheckpointSegment> out;
  for (const json& s : j)
    out.push_back({detail::json_integer<int>(s.at(0)), detail::json_integer<int>(s.at(1))});
  return out;
}

Phase phase_from(const std::string& name) {
  if (auto p = phase_from_name(name)) return *p;
  throw Error(fmt::format("unknown phase '{}'", name));
}

void print_indented(std::string& out, const std::string& text, std::string_view indent) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    fmt::format_to(std::back_inserter(out), "{}{}\n", indent, text.substr(start, nl - start));
    start = nl + 1;
  }
}

}  // namespace

json module_report_json(const std::optional<ModuleReport>& m) {
  if (!m) return nullptr;
  json modules = json::array();
  for (const ModuleMeasurement& x : m->modules) {
    modules.push_back({{"chain", x.chain},
                       {"name", x.name},
                       {"calls", x.calls},
                       {"saved_bytes", x.saved_bytes},
                       {"own_bytes", x.own_bytes},
                       {"input_saved_bytes", x.input_saved_bytes},
                       {"output_saved_bytes", x.output_saved_bytes},
                       {"input_bytes", x.input_bytes},
                       {"output_bytes", x.output_bytes},
                       {"aliases_input", x.aliases_input},
                       {"forward_ms", x.forward_ms},
                       {"forward_device_ms", optional_json(x.forward_device_ms)},
                       {"checkpointed", x.checkpointed}});
  }
  json plans = json::array();
  for (const CheckpointPlanReport& p : m->plans) {
    plans.push_back({{"chain", p.chain},
                     {"budget", p.budget},
                     {"budget_bytes", p.budget_bytes},
                     {"unconstrained_peak_bytes", p.unconstrained_peak_bytes},
                     {"predicted_peak_bytes", p.predicted_peak_bytes},
                     {"min_feasible_budget_bytes", p.min_feasible_budget_bytes},
                     {"forward_ms", p.forward_ms},
                     {"recompute_ms", p.recompute_ms},
                     {"step_overhead", optional_json(p.step_overhead)},
                     {"predicted_stored_bytes", p.predicted_stored_bytes},
                     {"measured_stored_bytes", optional_json(p.measured_stored_bytes)},
                     {"feasible", p.feasible},
                     {"applied", p.applied},
                     {"segments", segments_json(p.segments)},
                     {"message", p.message},
                     {"code", p.code}});
  }
  json ooms = json::array();
  for (const OutOfMemoryEvent& o : m->out_of_memory) {
    ooms.push_back({{"step", o.step},
                    {"phase", std::string(phase_name(o.phase))},
                    {"module", o.module},
                    {"peak_allocated_bytes", optional_json(o.peak_allocated_bytes)},
                    {"device_memory_bytes", optional_json(o.device_memory_bytes)},
                    {"error", o.error},
                    {"retried", o.retried},
                    {"recovered", o.recovered},
                    {"action", o.action}});
  }
  return {{"source", m->source},
          {"profiled_steps", m->profiled_steps},
          {"modules", modules},
          {"checkpoint_plans", plans},
          {"activation_plans", activation_plans_json(m->activation_plans)},
          {"out_of_memory", ooms}};
}

std::optional<ModuleReport> module_report_from(const json& epoch) {
  auto it = epoch.find("modules");
  if (it == epoch.end() || it->is_null()) return std::nullopt;
  const json& j = *it;
  ModuleReport m;
  m.source = j.at("source").get<std::string>();
  m.profiled_steps = detail::json_integer<std::int64_t>(j.at("profiled_steps"));
  for (const json& x : j.at("modules")) {
    ModuleMeasurement v;
    v.chain = x.at("chain").get<std::string>();
    v.name = x.at("name").get<std::string>();
    v.calls = detail::json_integer<std::int64_t>(x.at("calls"));
    v.saved_bytes = detail::json_integer<std::int64_t>(x.at("saved_bytes"));
    v.own_bytes = detail::json_integer<std::int64_t>(x.at("own_bytes"));
    v.input_saved_bytes = detail::json_integer<std::int64_t>(x.at("input_saved_bytes"));
    v.output_saved_bytes = detail::json_integer<std::int64_t>(x.at("output_saved_bytes"));
    v.input_bytes = detail::json_integer<std::int64_t>(x.at("input_bytes"));
    v.output_bytes = detail::json_integer<std::int64_t>(x.at("output_bytes"));
    v.aliases_input = x.at("aliases_input").get<bool>();
    v.forward_ms = x.at("forward_ms").get<double>();
    v.forward_device_ms = optional_from<double>(x, "forward_device_ms");
    v.checkpointed = x.at("checkpointed").get<bool>();
    m.modules.push_back(std::move(v));
  }
  for (const json& x : j.at("checkpoint_plans")) {
    CheckpointPlanReport p;
    p.chain = x.at("chain").get<std::string>();
    p.budget = x.at("budget").get<std::string>();
    p.budget_bytes = detail::json_integer<std::int64_t>(x.at("budget_bytes"));
    p.unconstrained_peak_bytes =
        detail::json_integer<std::int64_t>(x.at("unconstrained_peak_bytes"));
    p.predicted_peak_bytes = detail::json_integer<std::int64_t>(x.at("predicted_peak_bytes"));
    p.min_feasible_budget_bytes =
        detail::json_integer<std::int64_t>(x.at("min_feasible_budget_bytes"));
    p.forward_ms = x.at("forward_ms").get<double>();
    p.recompute_ms = x.at("recompute_ms").get<double>();
    p.step_overhead = optional_from<double>(x, "step_overhead");
    p.predicted_stored_bytes = detail::json_integer<std::int64_t>(x.at("predicted_stored_bytes"));
    p.measured_stored_bytes = optional_from<std::int64_t>(x, "measured_stored_bytes");
    p.feasible = x.at("feasible").get<bool>();
    p.applied = x.at("applied").get<bool>();
    p.segments = segments_from(x.at("segments"));
    p.message = x.at("message").get<std::string>();
    p.code = x.at("code").get<std::string>();
    m.plans.push_back(std::move(p));
  }
  m.activation_plans = activation_plans_from(j);
  for (const json& x : j.at("out_of_memory")) {
    OutOfMemoryEvent o;
    o.step = detail::json_integer<std::int64_t>(x.at("step"));
    o.phase = phase_from(x.at("phase").get<std::string>());
    o.module = x.at("module").get<std::string>();
    o.peak_allocated_bytes = optional_from<std::int64_t>(x, "peak_allocated_bytes");
    o.device_memory_bytes = optional_from<std::int64_t>(x, "device_memory_bytes");
    o.error = x.at("error").get<std::string>();
    o.retried = x.at("retried").get<bool>();
    o.recovered = x.at("recovered").get<bool>();
    o.action = x.at("action").get<std::string>();
    m.out_of_memory.push_back(std::move(o));
  }
  return m;
}

void module_report_section(std::string& out, const EpochSummary& e) {
  if (!e.modules) return;
  const ModuleReport& m = *e.modules;
  auto to = std::back_inserter(out);
  if (!m.modules.empty()) {
    fmt::format_to(to, "\nactivations by module ({} profiled step{}; {})\n", m.profiled_steps,
                   m.profiled_steps == 1 ? "" : "s", m.source);
    std::size_t width = 6;
    for (const ModuleMeasurement& x : m.modules) width = std::max(width, x.name.size());
    width = std::min<std::size_t>(width, 48);
    fmt::format_to(to, "  {:<{}} {:>11} {:>11} {:>10} {:>10} {}\n", "module", width, "saved",
                   "output", "fwd ms", "device ms", "");
    std::string chain;
    for (const ModuleMeasurement& x : m.modules) {
      if (x.chain != chain) {
        chain = x.chain;
        fmt::format_to(to, "  [{}]\n", chain);
      }
      const std::string device =
          x.forward_device_ms ? fmt::format("{:.3f}", *x.forward_device_ms) : "-";
      fmt::format_to(to, "  {:<{}} {:>11} {:>11} {:>10.3f} {:>10} {}\n", x.name, width,
                     bytes_text(x.saved_bytes), bytes_text(x.output_bytes), x.forward_ms, device,
                     x.checkpointed ? "checkpointed" : "");
    }
  }
  for (const CheckpointPlanReport& p : m.plans) {
    fmt::format_to(to, "\ncheckpoint plan for {} ({}, budget {}: {})\n", p.chain,
                   p.applied ? "applied" : "suggested", p.budget, bytes_text(p.budget_bytes));
    fmt::format_to(to, "  {}\n", p.message);
    if (p.feasible) {
      fmt::format_to(
          to,
          "  activation peak {} -> {} predicted; recompute {:.3f} ms per step ({:.0f}% of "
          "the forward{})\n",
          bytes_text(p.unconstrained_peak_bytes), bytes_text(p.predicted_peak_bytes),
          p.recompute_ms, p.forward_ms > 0 ? 100.0 * p.recompute_ms / p.forward_ms : 0.0,
          p.step_overhead ? fmt::format(", {:.1f}% of a step", 100.0 * *p.step_overhead) : "");
      fmt::format_to(
          to, "  saved after the forward: {} predicted{}\n", bytes_text(p.predicted_stored_bytes),
          p.measured_stored_bytes ? ", " + bytes_text(*p.measured_stored_bytes) + " measured" : "");
    }
    if (!p.code.empty()) {
      out += "  apply it:\n";
      print_indented(out, p.code, "    ");
    }
  }
  activation_plans_section(out, m.activation_plans);
  for (const OutOfMemoryEvent& o : m.out_of_memory) {
    fmt::format_to(to, "\nout of memory in step {}, {} phase{}\n", o.step, phase_name(o.phase),
                   o.module.empty() ? "" : ", module " + o.module);
    if (o.peak_allocated_bytes)
      fmt::format_to(to, "  peak allocated {}{}\n", bytes_text(*o.peak_allocated_bytes),
                     o.device_memory_bytes ? " of " + bytes_text(*o.device_memory_bytes) : "");
    fmt::format_to(to, "  error: {}\n", o.error);
    fmt::format_to(
        to, "  fathom: {}{}\n", o.action,
        o.retried ? (o.recovered ? " (the retry succeeded)" : " (the retry failed)") : "");
  }
}

}  // namespace fathom::detail
