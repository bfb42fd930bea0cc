#pragma once
// The step alarms: a change point in step time and memory creep, found by rank tests robust to
// single outliers (no fixed threshold on raw times fires on noise). The session runs them during
// the epoch, to mark the step in NVTX when they first hold, and at its end for the report.
#include <fathom/step_series.h>

#include <optional>
#include <string>
#include <vector>

namespace fathom {

// Pettitt's test over a series; the split maximizing the rank statistic, searched again to the
// right of a fall (a warm-up that got faster hides nothing behind it). Rises only: a step that got
// faster is not an alarm. thresholds.h says what must hold.
std::optional<StepChange> find_step_change(const StepSeries& s);
std::optional<MemoryCreep> find_memory_creep(const StepSeries& s);
// The alarms in one sentence each, for the finding's title, the NVTX mark and the in-run
// warning alike: "step time rose 31% from step 1204 (12.10 -> 15.90 ms)",
// "resident (RSS) memory grows 1.0 MiB per step since step 5".
std::string step_change_text(const StepChange& c);
std::string memory_creep_text(const MemoryCreep& c, const std::string& memory);
// Both, into the series.
void analyze_step_series(StepSeries& s);

// Exposed for tests: the p-value of Pettitt's statistic K over n points, and the Mann-Kendall z
// of a series.
double pettitt_p_value(double k, std::size_t n) noexcept;
double mann_kendall_z(const std::vector<double>& y) noexcept;

}  // namespace fathom
