#pragma once
// The epoch's steps one by one (bounded: past the capacity every other step is dropped and the
// stride doubles), and what a robust test found in them: a change point in step time, and memory
// that creeps up step after step. docs/report-schema.md "series"; docs/thresholds.md.
#include <fathom/phase.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fathom {

struct StepPoint {
  std::int64_t step = 0;
  double step_ms = 0;
  std::array<double, kPhaseCount> phase_ms{};  // the step's phases (data: its explicit scope, or
                                               // the gap before the step)
  std::optional<std::int64_t> memory_bytes;    // highest over the step's phases: the allocator's
                                               // peak on a GPU, resident memory on a CPU
};

// Step time changed at `step` and stayed changed: a rank test (Pettitt's) over the series, so
// single slow steps cannot make one, with its p-value and the medians on each side.
struct StepChange {
  std::int64_t step = 0;  // the first step after the change
  double before_ms = 0;   // median step time before
  double after_ms = 0;    // ... and from `step` on
  double relative = 0;    // after / before - 1
  double p_value = 1;
  std::int64_t steps_before = 0, steps_after = 0;  // points on each side
  std::string phase;  // the phase whose median grew most ("" when none grew)
  double phase_before_ms = 0, phase_after_ms = 0;
};

// Memory that rises steadily over the steps (Mann-Kendall's trend test; Theil-Sen's slope).
struct MemoryCreep {
  std::int64_t from_step = 0, to_step = 0;
  double bytes_per_step = 0;
  std::int64_t first_bytes = 0, last_bytes = 0;  // medians of the first and last quarters
  double z = 0;                                  // the trend statistic
};

struct StepSeries {
  std::int64_t stride = 1;  // every stride-th step is a point
  std::vector<StepPoint> points;
  std::string memory;  // what memory_bytes measures: "device allocated peak", "resident (RSS)"
  std::optional<StepChange> change;
  std::optional<MemoryCreep> creep;
};

}  // namespace fathom
