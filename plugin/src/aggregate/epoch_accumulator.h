#pragma once
// Folds phase, step and copy records into an EpochSummary as they arrive. Memory is bounded:
// it grows with the number of distinct copy kinds, never with the number of steps (the step
// series keeps at most thresholds::kStepSeriesCapacity points).
#include <fathom/records.h>
#include <fathom/report.h>

#include <cstdint>

#include "aggregate/step_series_builder.h"

namespace fathom {

class EpochAccumulator {
 public:
  explicit EpochAccumulator(std::int64_t epoch_index, std::int64_t begin_ns) noexcept;

  // An inferred data record (the gap between steps) counts only in an epoch that has no
  // explicit data scope: a loop that times its loading itself is not second-guessed.
  void add(const PhaseRecord& r) noexcept;
  void add(const StepRecord& r) noexcept;
  void add(const CopyRecord& r);
  void set_peak_rss(std::int64_t bytes) noexcept { summary_.peak_rss_bytes = bytes; }

  const StepSeries& series() const noexcept { return series_.series(); }
  // The summary of the epoch so far, as if it ended at end_ns.
  EpochSummary finish(std::int64_t end_ns, bool by_exception) const;

 private:
  EpochSummary summary_;
  PhaseSummary inferred_data_;
  StepSeriesBuilder series_;
  std::int64_t begin_ns_;
};

}  // namespace fathom
