// Memory rules: near capacity, hardware fit, larger batch (advisor_memory_rules.cpp).
#include <gtest/gtest.h>

#include "advise/advisor.h"
#include "advisor_fixtures.h"
#include "analyze/fit_hardware.h"

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

// The finding's evidence follows the writers' rule (epoch_hardware_fit): a CPU run's needs are
// not weighed against GPU cards.
TEST(AdvisorMemory, HardwareFitOnACpuRunNamesNoGpuCard) {
  EpochSummary e = epoch_with(1000, 0);
  e.footprint = footprint();
  e.device_memory = DeviceMemoryPeak{21 * GiB, 22 * GiB, 0, 0};
  Environment env = device_of(24 * GiB);
  env.device = "cpu";
  const auto f = find(advise(e, env), finding_id::kHardwareFit);
  ASSERT_TRUE(f);
  EXPECT_EQ(evidence(*f, "fp32 (as run)")->value, "needs 22.75 GiB");
  for (const Evidence& ev : f->evidence) EXPECT_EQ(ev.value.find("GB,"), std::string::npos);
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

CheckpointPlanReport plan(bool feasible, bool applied) {
  CheckpointPlanReport p;
  p.chain = "features (Sequential)";
  p.budget = "12.00 GiB";
  p.budget_bytes = 20LL << 20;
  p.unconstrained_peak_bytes = 64LL << 20;
  p.predicted_peak_bytes = 16LL << 20;
  p.recompute_ms = 2.5;
  p.feasible = feasible;
  p.applied = applied;
  p.message = "checkpoint 2 segments";
  p.code = "fathom::checkpoint(...)";
  return p;
}

// The checkpoint extension hands the advisor its plans as typed fields; the finding (its id
// declared in finding_id) is the advisor's.
TEST(AdvisorMemory, CheckpointFindingFromATypedPlan) {
  EpochSummary e = epoch_with(1000, 0);
  e.modules = ModuleReport{};
  e.modules->plans = {plan(/*feasible=*/true, /*applied=*/true)};
  const auto f = find(advise(e, Environment{}), finding_id::kActivationCheckpointing);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->id, "memory.activation_checkpointing");
  // Applied by fathom: no longer a problem, so info whatever the plan's rating (issue 16).
  EXPECT_EQ(f->severity, Severity::Info);
  EXPECT_TRUE(f->applied);
  EXPECT_EQ(f->title, "fathom checkpoints activations of features (Sequential)");
  EXPECT_EQ(evidence(*f, "activation peak without checkpointing")->value, "64.0 MiB");
  EXPECT_EQ(evidence(*f, "activation budget")->value, "20.0 MiB (12.00 GiB)");
  EXPECT_EQ(evidence(*f, "predicted activation peak")->value, "16.0 MiB");
  EXPECT_EQ(evidence(*f, "recompute per step")->value, "2.500 ms");
  EXPECT_EQ(f->estimated_gain, "48.0 MiB less activation memory");
  EXPECT_EQ(f->why, "checkpoint 2 segments");
  EXPECT_EQ(f->fix, "fathom::checkpoint(...)");
}

TEST(AdvisorMemory, CheckpointSuggestionThatCannotFitIsCritical) {
  EpochSummary e = epoch_with(1000, 0);
  e.modules = ModuleReport{};
  e.modules->plans = {plan(/*feasible=*/false, /*applied=*/false)};
  const auto f = find(advise(e, Environment{}), finding_id::kActivationCheckpointing);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::Critical);
  EXPECT_FALSE(f->applied);
  EXPECT_EQ(f->title, "Checkpoint activations of features (Sequential)");
  // No plan, no finding.
  e.modules->plans.clear();
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kActivationCheckpointing));
}

// The checkpoint extension's Suggest and Auto plans start from this decision.
TEST(AdvisorMemory, CheckpointTargetFollowsTheNearCapacityThreshold) {
  // GPU, no budget: 90 % of device memory bounds the step's peak; the activations give up the rest.
  const auto t = checkpoint_activation_target(200, 950, 1000, std::nullopt);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->bytes, 150);
  EXPECT_EQ(t->budget, "90 % of device memory");
  EXPECT_FALSE(checkpoint_activation_target(200, 850, 1000, std::nullopt));
  EXPECT_FALSE(checkpoint_activation_target(200, std::nullopt, 1000, std::nullopt));
  // CPU: only a budget presses, a fraction being of the activations.
  EXPECT_FALSE(checkpoint_activation_target(200, std::nullopt, std::nullopt, std::nullopt));
  const auto cpu =
      checkpoint_activation_target(200, std::nullopt, std::nullopt, MemoryBudget::fraction(0.5));
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->bytes, 100);
  EXPECT_EQ(cpu->budget, "50 % of the activations (CPU)");
  EXPECT_FALSE(
      checkpoint_activation_target(200, std::nullopt, std::nullopt, MemoryBudget::bytes(300)));
}

}  // namespace
}  // namespace fathom
