#pragma once
// Builds the epoch's StepSeries as steps and phases arrive: a phase record may come after its
// step's record (device timings are drained later), so points are found by step index. Bounded:
// past kStepSeriesCapacity points every other one is dropped and the stride doubles.
#include <fathom/records.h>
#include <fathom/step_series.h>

namespace fathom {

class StepSeriesBuilder {
 public:
  void add(const StepRecord& r) noexcept;
  void add(const PhaseRecord& r) noexcept;
  const StepSeries& series() const noexcept { return s_; }

 private:
  StepPoint* point_of(std::int64_t step) noexcept;
  StepSeries s_;
};

}  // namespace fathom
