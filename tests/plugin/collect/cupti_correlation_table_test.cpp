#include <gtest/gtest.h>

#include "aggregate/gpu_aggregator.h"
#include "collect/cupti/correlation_table.h"

namespace fathom::cupti {
namespace {

ExternalCorrelation op(std::uint32_t correlation, std::uint64_t id) {
  return {correlation, kFathomCorrelation, id | kOpIdBit};
}
ExternalCorrelation phase(std::uint32_t correlation, Phase p) {
  return {correlation, kFathomCorrelation, phase_correlation_id(p)};
}

TEST(CorrelationTable, AttributesEveryRecordKindToItsOpAndPhase) {
  CorrelationTable t;
  t.add({op(1, 100), phase(1, Phase::Forward), op(2, 200), phase(2, Phase::Backward),
         phase(3, Phase::Copy)});
  GpuActivity a;
  a.kernels.push_back({{.correlation_id = 1}, "k"});
  a.memcpys.push_back({{.correlation_id = 3}});
  a.memsets.push_back({{.correlation_id = 2}});
  a.syncs.push_back({.correlation_id = 2});
  a.runtime_calls.push_back({.name = "cudaLaunchKernel", .correlation_id = 1});
  a.kernels.push_back({{.correlation_id = 99}, "unattributed"});
  t.attribute(a);
  EXPECT_EQ(a.kernels[0].external_id, 100u);
  EXPECT_EQ(a.kernels[0].phase, Phase::Forward);
  EXPECT_EQ(a.memcpys[0].external_id, 0u) << "a copy outside any op has a phase but no op";
  EXPECT_EQ(a.memcpys[0].phase, Phase::Copy);
  EXPECT_EQ(a.memsets[0].external_id, 200u);
  EXPECT_EQ(a.memsets[0].phase, Phase::Backward);
  EXPECT_EQ(a.syncs[0].external_id, 200u);
  EXPECT_EQ(a.runtime_calls[0].external_id, 100u);
  EXPECT_EQ(a.kernels[1].external_id, 0u);
  EXPECT_FALSE(a.kernels[1].phase.has_value());
}

TEST(CorrelationTable, AGraphLaunchAttributesAllItsKernels) {
  CorrelationTable t;
  t.add({op(5, 50)});
  GpuActivity a;
  for (int i = 0; i < 3; ++i) a.kernels.push_back({{.correlation_id = 5}});
  t.attribute(a);
  for (const KernelRecord& k : a.kernels) EXPECT_EQ(k.external_id, 50u);
}

// Issue 23: in a loop without a sync per step, a stream's kernel buffer comes back only when
// full (~4,850 kernels), many step-end deliveries after the launches' correlations arrived. A
// correlation is kept until its GPU record has arrived, however many deliveries that takes.
TEST(CorrelationTable, OwedCorrelationsOutliveAnyNumberOfDeliveries) {
  CorrelationTable t;
  t.add({op(1, 10), phase(1, Phase::Forward)});
  for (int d = 0; d < 100; ++d) t.next_delivery();
  GpuActivity a;
  a.kernels.push_back({{.correlation_id = 1}});
  t.attribute(a);
  EXPECT_EQ(a.kernels[0].external_id, 10u) << "a kernel delivered 100 step ends after its launch";
  EXPECT_EQ(a.kernels[0].phase, Phase::Forward);
}

TEST(CorrelationTable, PaidCorrelationsAreKeptAFewDeliveriesThenForgotten) {
  CorrelationTable t;
  t.add({op(1, 10)});
  GpuActivity first;
  first.kernels.push_back({{.correlation_id = 1}});
  t.attribute(first);
  // A graph launch's other kernels (one correlation id) may come back in the next buffers.
  for (std::uint32_t d = 1; d < CorrelationTable::kKeepDeliveries; ++d) {
    t.next_delivery();
    GpuActivity a;
    a.kernels.push_back({{.correlation_id = 1}});
    t.attribute(a);
    EXPECT_EQ(a.kernels[0].external_id, 10u) << "after " << d << " deliveries";
  }
  t.next_delivery();
  EXPECT_EQ(t.size(), 0u);
  GpuActivity late;
  late.kernels.push_back({{.correlation_id = 1}});
  t.attribute(late);
  EXPECT_EQ(late.kernels[0].external_id, 0u);
}

TEST(CorrelationTable, CallsThatLaunchNoGpuWorkOweNothing) {
  CorrelationTable t;
  t.add({phase(1, Phase::Optimizer), phase(2, Phase::Optimizer)});
  GpuActivity a;
  a.runtime_calls.push_back({.name = "cudaStreamSynchronize", .correlation_id = 1});
  a.runtime_calls.push_back({.name = "cudaLaunchKernel", .correlation_id = 2});
  t.attribute(a);
  EXPECT_EQ(a.runtime_calls[0].phase, Phase::Optimizer);
  for (std::uint32_t d = 0; d < CorrelationTable::kKeepDeliveries; ++d) t.next_delivery();
  EXPECT_EQ(t.size(), 1u) << "the launch still owes its kernel";
  EXPECT_TRUE(launches_gpu_work("cudaMemcpyAsync"));
  EXPECT_TRUE(launches_gpu_work("cuLaunchKernel"));
  EXPECT_TRUE(launches_gpu_work("cudaGraphLaunch"));
  EXPECT_FALSE(launches_gpu_work("cudaEventRecord"));
}

TEST(CorrelationTable, SettleForgetsWhatAForcedFlushProvedWillNeverCome) {
  CorrelationTable t;
  t.add({op(1, 10), op(2, 20)});
  t.settle();
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.cut(), 0) << "nothing owed was cut by the memory bound";
}

TEST(CorrelationTable, TheMemoryBoundCutsTheOldestOwedAndCountsThem) {
  CorrelationTable t;
  std::vector<ExternalCorrelation> batch;
  for (std::uint32_t i = 1; i <= CorrelationTable::kMaxEntries; ++i) {
    batch.push_back(op(i, i));
    if (batch.size() == 4096) {
      t.add(batch);
      batch.clear();
      t.next_delivery();
    }
  }
  t.add(batch);
  EXPECT_EQ(t.cut(), 0);
  t.add({op(CorrelationTable::kMaxEntries + 1, 7)});
  EXPECT_GT(t.cut(), 0);
  EXPECT_LE(t.size(), CorrelationTable::kMaxEntries);
  GpuActivity a;
  a.kernels.push_back({{.correlation_id = 1}});                              // the oldest: cut
  a.kernels.push_back({{.correlation_id = CorrelationTable::kMaxEntries}});  // the newest: kept
  t.attribute(a);
  EXPECT_EQ(a.kernels[0].external_id, 0u);
  EXPECT_EQ(a.kernels[1].external_id, CorrelationTable::kMaxEntries);
}

TEST(CorrelationTable, OnlyFathomsKindsAreKept) {
  CorrelationTable t;
  // Kineto's ops (CUSTOM0) and annotations (CUSTOM1) are its own.
  t.add({{1, CUPTI_EXTERNAL_CORRELATION_KIND_OPENACC, 5},
         {1, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 6},
         {1, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 7}});
  EXPECT_EQ(t.size(), 0u);
}

TEST(CorrelationTable, PhaseIdsRoundTrip) {
  for (Phase p : kAllPhases) EXPECT_EQ(phase_from_correlation_id(phase_correlation_id(p)), p);
  EXPECT_FALSE(phase_from_correlation_id(0).has_value());
  EXPECT_FALSE(phase_from_correlation_id(kPhaseCount + 1).has_value());
}

}  // namespace
}  // namespace fathom::cupti
