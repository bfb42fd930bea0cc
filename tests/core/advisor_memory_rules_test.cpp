// Memory rules: near capacity, hardware fit, larger batch (advisor_memory_rules.cpp).
#include <gtest/gtest.h>

#include "advise/advisor.h"
#include "advisor_fixtures.h"

namespace fathom {
namespace {

using test::epoch_with;
using test::evidence;
using test::find;

constexpr std::int64_t GiB = 1LL << 30;

Environment device_of(std::int64_t bytes) {
  Environment env;
  env.device_memory_bytes = bytes;
  return env;
}

TEST(AdvisorMemory, NearCapacityFiresAboveNinetyPercent) {
  EpochSummary e = epoch_with(1000, 0);
  e.device_memory = DeviceMemoryPeak{900, 950, 3, 0};
  const auto f = find(advise(e, device_of(1000)), finding_id::kMemoryNearCapacity);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::Warning);
  EXPECT_EQ(evidence(*f, "share")->value, "95.0 %");
  EXPECT_EQ(evidence(*f, "allocator retries")->value, "3");
  // The fix names all three ways out: checkpointing / mixed precision (Auto), a smaller batch.
  EXPECT_NE(f->fix.find("Mode::Auto"), std::string::npos);
  EXPECT_NE(f->fix.find("backward()"), std::string::npos);
}

TEST(AdvisorMemory, NearCapacityQuietBelowNinetyPercentAndWithoutDeviceSize) {
  EpochSummary e = epoch_with(1000, 0);
  e.device_memory = DeviceMemoryPeak{800, 850, 0, 0};
  EXPECT_FALSE(find(advise(e, device_of(1000)), finding_id::kMemoryNearCapacity));
  e.device_memory->peak_reserved_bytes = 950;
  // Without a known device size there is no share to judge: no finding, no invented number.
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kMemoryNearCapacity));
}

TEST(AdvisorMemory, OutOfMemoryIsCriticalEvenBelowThreshold) {
  EpochSummary e = epoch_with(1000, 0);
  e.device_memory = DeviceMemoryPeak{500, 600, 0, 1};
  const auto f = find(advise(e, device_of(1000)), finding_id::kMemoryNearCapacity);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::Critical);
}

TEST(AdvisorMemory, NearCapacityFromNvmlWhenTheAllocatorWasNotRead) {
  EpochSummary e = epoch_with(1000, 0);
  e.telemetry = test::busy_telemetry();
  e.telemetry->memory_used_bytes_max = 76LL * GiB;  // of 80
  const auto f = find(advise(e, Environment{}), finding_id::kMemoryNearCapacity);
  ASSERT_TRUE(f);
  EXPECT_EQ(evidence(*f, "measured as")->value, "NVML peak memory used");
}

MemoryFootprint footprint() {
  MemoryFootprint m;
  m.parameter_count = 500'000'000;
  m.parameter_bytes = 2 * GiB;
  m.gradient_bytes = 2 * GiB;
  m.optimizer_state_bytes = 4 * GiB;
  m.activation_bytes = 13 * GiB;
  m.checkpointable_blocks = 16;
  return m;
}

TEST(AdvisorMemory, HardwareFitFiresWhenTheRunFillsItsCard) {
  EpochSummary e = epoch_with(1000, 0);
  e.footprint = footprint();
  e.device_memory = DeviceMemoryPeak{21 * GiB, 22 * GiB, 0, 0};  // of 24: 91.7 %
  const auto f = find(advise(e, device_of(24 * GiB)), finding_id::kHardwareFit);
  ASSERT_TRUE(f);
  // As run: (2+2+4+13) GiB x 22/21 fragmentation + 0.75 GiB assumed overhead = 22.75 GiB.
  const Evidence* as_run = evidence(*f, "fp32 (as run)");
  ASSERT_NE(as_run, nullptr);
  EXPECT_EQ(as_run->value, "needs 22.75 GiB; fits 24 GB (tight), 40 GB, 80 GB, 141 GB");
  // Mixed precision: (8 + 6.5 activations + 1 weight copies) x 22/21 + 0.75 = 16.99 GiB.
  EXPECT_EQ(evidence(*f, "mixed precision")->value,
            "needs 16.99 GiB; fits 24 GB, 40 GB, 80 GB, 141 GB");
  // The least change that fits with headroom is mixed precision (the larger of the fitting needs).
  EXPECT_NE(f->estimated_gain.find("with mixed precision"), std::string::npos) << f->estimated_gain;
  EXPECT_NE(f->fix.find("Mode::Auto"), std::string::npos);
}

TEST(AdvisorMemory, HardwareFitQuietWithRoomToSpare) {
  EpochSummary e = epoch_with(1000, 0);
  e.footprint = footprint();
  e.device_memory = DeviceMemoryPeak{21 * GiB, 22 * GiB, 0, 0};
  EXPECT_FALSE(find(advise(e, device_of(80 * GiB)), finding_id::kHardwareFit));
  e.footprint.reset();  // nothing measured: nothing to say, even on a full card
  EXPECT_FALSE(find(advise(e, device_of(24 * GiB)), finding_id::kHardwareFit));
}

TEST(AdvisorMemory, BatchHeadroomFiresWhenGpuAndMemoryIdle) {
  EpochSummary e = epoch_with(1000, 0);
  e.telemetry = test::busy_telemetry();
  e.telemetry->gpu_utilization_pct_mean = 30;
  e.telemetry->memory_used_bytes_max = 20LL * GiB;  // 25 % of 80
  const auto f = find(advise(e, Environment{}), finding_id::kBatchHeadroom);
  ASSERT_TRUE(f);
  EXPECT_EQ(evidence(*f, "GPU busy")->value, "30.0 %");
  EXPECT_EQ(f->estimated_gain, "up to 70.0 % of GPU time is idle now");
  EXPECT_NE(f->fix.find("batch_size(2 * bs)"), std::string::npos);
}

TEST(AdvisorMemory, BatchHeadroomQuietWhenEitherIsBusyOrUnmeasured) {
  EpochSummary e = epoch_with(1000, 0);
  e.telemetry = test::busy_telemetry();  // 90 % busy, 50 % memory
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kBatchHeadroom));
  e.telemetry->gpu_utilization_pct_mean = 30;
  e.telemetry->memory_used_bytes_max = 60LL * GiB;  // memory busy
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kBatchHeadroom));
  e.telemetry->memory_used_bytes_max = 20LL * GiB;
  e.telemetry->gpu_utilization_pct_mean.reset();  // busy not measured
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kBatchHeadroom));
}

}  // namespace
}  // namespace fathom
