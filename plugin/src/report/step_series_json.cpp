#include "report/step_series_json.h"

#include "base/json_number.h"
#include "base/thresholds.h"
#include "report/json_helpers.h"

namespace fathom::detail {

using nlohmann::json;

json step_series_json(const std::optional<StepSeries>& s) {
  if (!s) return nullptr;
  const std::size_t n = s->points.size();
  const std::size_t every =
      (n + thresholds::kStepSeriesReported - 1) / thresholds::kStepSeriesReported;
  json points = json::array();
  for (std::size_t i = 0; i < n; i += std::max<std::size_t>(1, every)) {
    const StepPoint& p = s->points[i];
    json phases = json::object();
    for (Phase ph : kAllPhases)
      phases[std::string(phase_name(ph))] = p.phase_ms[static_cast<std::size_t>(ph)];
    points.push_back({{"step", p.step},
                      {"step_ms", p.step_ms},
                      {"phase_ms", phases},
                      {"memory_bytes", optional_json(p.memory_bytes)}});
  }
  json change = nullptr, creep = nullptr;
  if (s->change) {
    const StepChange& c = *s->change;
    change = {{"step", c.step},
              {"before_ms", c.before_ms},
              {"after_ms", c.after_ms},
              {"relative", c.relative},
              {"p_value", c.p_value},
              {"steps_before", c.steps_before},
              {"steps_after", c.steps_after},
              {"phase", c.phase},
              {"phase_before_ms", c.phase_before_ms},
              {"phase_after_ms", c.phase_after_ms}};
  }
  if (s->creep) {
    const MemoryCreep& c = *s->creep;
    creep = {{"from_step", c.from_step},           {"to_step", c.to_step},
             {"bytes_per_step", c.bytes_per_step}, {"first_bytes", c.first_bytes},
             {"last_bytes", c.last_bytes},         {"z", c.z}};
  }
  return {{"stride", s->stride * static_cast<std::int64_t>(std::max<std::size_t>(1, every))},
          {"memory", s->memory},
          {"points", points},
          {"change", change},
          {"creep", creep}};
}

std::optional<StepSeries> step_series_from(const json& epoch) {
  auto it = epoch.find("series");
  if (it == epoch.end() || it->is_null()) return std::nullopt;
  const json& j = *it;
  StepSeries s;
  s.stride = detail::json_integer<std::int64_t>(j.at("stride"));
  s.memory = j.at("memory").get<std::string>();
  for (const json& p : j.at("points")) {
    StepPoint x;
    x.step = detail::json_integer<std::int64_t>(p.at("step"));
    x.step_ms = p.at("step_ms").get<double>();
    for (Phase ph : kAllPhases)
      x.phase_ms[static_cast<std::size_t>(ph)] =
          p.at("phase_ms").at(std::string(phase_name(ph))).get<double>();
    x.memory_bytes = optional_from<std::int64_t>(p, "memory_bytes");
    s.points.push_back(x);
  }
  if (const json& c = j.at("change"); !c.is_null()) {
    StepChange x;
    x.step = detail::json_integer<std::int64_t>(c.at("step"));
    x.before_ms = c.at("before_ms").get<double>();
    x.after_ms = c.at("after_ms").get<double>();
    x.relative = c.at("relative").get<double>();
    x.p_value = c.at("p_value").get<double>();
    x.steps_before = detail::json_integer<std::int64_t>(c.at("steps_before"));
    x.steps_after = detail::json_integer<std::int64_t>(c.at("steps_after"));
    x.phase = c.at("phase").get<std::string>();
    x.phase_before_ms = c.at("phase_before_ms").get<double>();
    x.phase_after_ms = c.at("phase_after_ms").get<double>();
    s.change = x;
  }
  if (const json& c = j.at("creep"); !c.is_null()) {
    MemoryCreep x;
    x.from_step = detail::json_integer<std::int64_t>(c.at("from_step"));
    x.to_step = detail::json_integer<std::int64_t>(c.at("to_step"));
    x.bytes_per_step = c.at("bytes_per_step").get<double>();
    x.first_bytes = detail::json_integer<std::int64_t>(c.at("first_bytes"));
    x.last_bytes = detail::json_integer<std::int64_t>(c.at("last_bytes"));
    x.z = c.at("z").get<double>();
    s.creep = x;
  }
  return s;
}

}  // namespace fathom::detail
