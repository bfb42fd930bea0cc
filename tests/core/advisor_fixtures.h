#pragma once
// Epochs and lookups shared by the advisor rule tests.
#include <algorithm>
#include <optional>
#include <string_view>

#include "advise/advisor.h"

namespace fathom::test {

// An epoch of `steps` steps whose step time is all forward (so the unaccounted rule stays quiet)
// and whose data phase is the gap between steps.
inline EpochSummary epoch_with(double step_ms_total, double data_ms_total,
                               std::int64_t steps = 10) {
  EpochSummary e;
  for (Phase p : kAllPhases) e.phases[static_cast<std::size_t>(p)].phase = p;
  e.steps = steps;
  e.step_ms_total = step_ms_total;
  e.wall_ms = step_ms_total + data_ms_total;
  auto& data = e.phases[static_cast<std::size_t>(Phase::Data)];
  data.count = steps;
  data.inferred = true;
  data.wall_ms_total = data_ms_total;
  auto& fwd = e.phases[static_cast<std::size_t>(Phase::Forward)];
  fwd.count = steps;
  fwd.wall_ms_total = step_ms_total;
  return e;
}

// A copy: advise() returns a temporary.
inline std::optional<Finding> find(const std::vector<Finding>& fs, std::string_view id) {
  auto it = std::find_if(fs.begin(), fs.end(), [&](const Finding& f) { return f.id == id; });
  if (it == fs.end()) return std::nullopt;
  return *it;
}

inline const Evidence* evidence(const Finding& f, std::string_view name) {
  auto it = std::find_if(f.evidence.begin(), f.evidence.end(),
                         [&](const Evidence& e) { return e.name == name; });
  return it == f.evidence.end() ? nullptr : &*it;
}

// Telemetry of a busy device on a gen 4 x16 link that supports gen 5 x16.
inline DeviceTelemetry busy_telemetry() {
  DeviceTelemetry t;
  t.source = "nvml";
  t.samples = 100;
  t.gpu_utilization_pct_mean = 90;
  t.memory_used_bytes_max = 40LL << 30;
  t.memory_total_bytes = 80LL << 30;
  t.pcie = PcieLinkState{5, 16, 5, 16, true};
  t.sm_clock_mhz_mean = 1980;
  t.sm_clock_mhz_max = 1980;
  return t;
}

}  // namespace fathom::test
