#include "aggregate/epoch_accumulator.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

constexpr std::int64_t kMs = 1'000'000;

PhaseRecord phase(Phase p, std::int64_t begin_ms, std::int64_t end_ms, bool inferred = false) {
  PhaseRecord r;
  r.phase = p;
  r.begin_ns = begin_ms * kMs;
  r.end_ns = end_ms * kMs;
  r.inferred = inferred;
  return r;
}

TEST(EpochAccumulator, SumsPhasesAndSteps) {
  EpochAccumulator acc(3, 0);
  acc.add(phase(Phase::Forward, 0, 4));
  acc.add(phase(Phase::Forward, 10, 16));
  acc.add(phase(Phase::Backward, 4, 9));
  acc.add(StepRecord{0, 32, 0, 10 * kMs, false});
  acc.add(StepRecord{1, 32, 10 * kMs, 30 * kMs, true});
  EpochSummary s = acc.finish(40 * kMs, false);
  EXPECT_EQ(s.index, 3);
  EXPECT_EQ(s.steps, 2);
  EXPECT_EQ(s.failed_steps, 1);
  EXPECT_EQ(s.samples, 64);
  EXPECT_DOUBLE_EQ(s.wall_ms, 40.0);
  EXPECT_DOUBLE_EQ(s.step_ms_total, 30.0);
  EXPECT_DOUBLE_EQ(s.step_ms_max, 20.0);
  // Over the steps' 30 ms, not the epoch's 40 (issue 24: samples/s and step time disagreed).
  EXPECT_DOUBLE_EQ(s.samples_per_second(), 64 / 0.030);
  const PhaseSummary& fwd = s.phase(Phase::Forward);
  EXPECT_EQ(fwd.count, 2);
  EXPECT_DOUBLE_EQ(fwd.wall_ms_total, 10.0);
  EXPECT_DOUBLE_EQ(fwd.wall_ms_max, 6.0);
  EXPECT_DOUBLE_EQ(fwd.wall_ms_mean(), 5.0);
  EXPECT_EQ(s.phase(Phase::Optimizer).count, 0);
}

TEST(EpochAccumulator, InferredDataCountsOnlyWithoutExplicitDataScopes) {
  EpochAccumulator inferred_only(0, 0);
  inferred_only.add(phase(Phase::Data, 0, 3, /*inferred=*/true));
  EpochSummary a = inferred_only.finish(10 * kMs, false);
  EXPECT_EQ(a.phase(Phase::Data).count, 1);
  EXPECT_TRUE(a.phase(Phase::Data).inferred);
  EXPECT_DOUBLE_EQ(a.phase(Phase::Data).wall_ms_total, 3.0);

  EpochAccumulator explicit_too(0, 0);
  explicit_too.add(phase(Phase::Data, 0, 3, /*inferred=*/true));
  explicit_too.add(phase(Phase::Data, 3, 5));
  EpochSummary b = explicit_too.finish(10 * kMs, false);
  EXPECT_EQ(b.phase(Phase::Data).count, 1);
  EXPECT_FALSE(b.phase(Phase::Data).inferred);
  EXPECT_DOUBLE_EQ(b.phase(Phase::Data).wall_ms_total, 2.0);
}

TEST(EpochAccumulator, CopiesGroupByKindNotByCount) {
  EpochAccumulator acc(0, 0);
  for (int i = 0; i < 1000; ++i) {
    acc.add(CopyRecord{CopyDirection::HostToDevice, 100, false, false, 0, kMs, i});
    acc.add(CopyRecord{CopyDirection::HostToDevice, 50, true, true, 0, kMs, i});
  }
  EpochSummary s = acc.finish(kMs, false);
  ASSERT_EQ(s.copies.size(), 2u);
  EXPECT_EQ(s.copies[0].count, 1000);
  EXPECT_EQ(s.copies[0].bytes, 100000);
  EXPECT_FALSE(s.copies[0].pinned);
  EXPECT_EQ(s.copies[1].bytes, 50000);
  EXPECT_TRUE(s.copies[1].pinned);
  EXPECT_DOUBLE_EQ(s.copies[1].wall_ms_total, 1000.0);
}

TEST(EpochAccumulator, DeviceTimeAndMemoryPeaks) {
  EpochAccumulator acc(0, 0);
  PhaseRecord a = phase(Phase::Forward, 0, 1);
  a.device_ms = 0.5;
  a.device_memory = DeviceMemoryPeak{100, 200, 1, 0};
  PhaseRecord b = phase(Phase::Backward, 1, 2);
  b.device_ms = 0.25;
  b.device_memory = DeviceMemoryPeak{300, 150, 0, 1};
  acc.add(a);
  acc.add(b);
  acc.add(a);
  EpochSummary s = acc.finish(2 * kMs, true);
  EXPECT_TRUE(s.ended_by_exception);
  EXPECT_DOUBLE_EQ(*s.phase(Phase::Forward).device_ms_total, 1.0);
  ASSERT_TRUE(s.device_memory);
  EXPECT_EQ(s.device_memory->peak_allocated_bytes, 300);
  EXPECT_EQ(s.device_memory->peak_reserved_bytes, 200);
  EXPECT_EQ(s.device_memory->alloc_retries, 2);
  EXPECT_EQ(s.device_memory->ooms, 1);
  EXPECT_FALSE(s.phase(Phase::Optimizer).device_ms_total.has_value());
}

TEST(EpochAccumulator, AbortedPhasesAreCounted) {
  EpochAccumulator acc(0, 0);
  PhaseRecord r = phase(Phase::Forward, 0, 1);
  r.aborted = true;
  acc.add(r);
  EXPECT_EQ(acc.finish(kMs, true).phase(Phase::Forward).aborted, 1);
}

}  // namespace
}  // namespace fathom
