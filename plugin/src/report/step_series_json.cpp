#include "report/step_series_json.h"

#include <algorithm>

#include "base/json_fields.h"
#include "base/thresholds.h"

namespace fathom::detail {

// The phases of a step point: an object keyed by phase name.
template <>
struct JsonCodec<std::array<double, kPhaseCount>> {
  static nlohmann::json write(const std::array<double, kPhaseCount>& ms) {
    nlohmann::json out = nlohmann::json::object();
    for (Phase p : kAllPhases) out[std::string(phase_name(p))] = ms[static_cast<std::size_t>(p)];
    return out;
  }
  static void read(const nlohmann::json& j, std::array<double, kPhaseCount>& ms) {
    for (Phase p : kAllPhases)
      ms[static_cast<std::size_t>(p)] = j.at(std::string(phase_name(p))).get<double>();
  }
};

template <typename V>
static void fields(V& v, StepPoint& p) {
  v("step", p.step);
  v("step_ms", p.step_ms);
  v("phase_ms", p.phase_ms);
  v.since("memory_bytes", p.memory_bytes);
}

template <typename V>
static void fields(V& v, StepChange& c) {
  v("step", c.step);
  v("before_ms", c.before_ms);
  v("after_ms", c.after_ms);
  v("relative", c.relative);
  v("p_value", c.p_value);
  v("steps_before", c.steps_before);
  v("steps_after", c.steps_after);
  v("phase", c.phase);
  v("phase_before_ms", c.phase_before_ms);
  v("phase_after_ms", c.phase_after_ms);
}

template <typename V>
static void fields(V& v, MemoryCreep& c) {
  v("from_step", c.from_step);
  v("to_step", c.to_step);
  v("bytes_per_step", c.bytes_per_step);
  v("first_bytes", c.first_bytes);
  v("last_bytes", c.last_bytes);
  v("z", c.z);
}

template <typename V>
static void describe(V& v, StepSeries& s) {
  v("stride", s.stride);
  v("memory", s.memory);
  v("points", s.points);
  v("change", s.change);
  v("creep", s.creep);
}

void fields(JsonWriter& v, StepSeries& s) { describe(v, s); }
void fields(JsonReader& v, StepSeries& s) { describe(v, s); }

StepSeries reported_series(const StepSeries& s) {
  const std::size_t n = s.points.size();
  const std::size_t every = std::max<std::size_t>(
      1, (n + thresholds::kStepSeriesReported - 1) / thresholds::kStepSeriesReported);
  StepSeries reported = s;
  reported.points.clear();
  for (std::size_t i = 0; i < n; i += every) reported.points.push_back(s.points[i]);
  reported.stride = s.stride * static_cast<std::int64_t>(every);
  return reported;
}

}  // namespace fathom::detail
