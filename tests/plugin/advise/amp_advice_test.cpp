#include "advise/amp_advice.h"

#include <gtest/gtest.h>

#include "advise/advisor.h"
#include "analyze/tensor_core_analysis.h"

namespace fathom {
namespace {

EpochSummary epoch_with_device_times() {
  EpochSummary e;
  for (Phase p : kAllPhases) e.phases[static_cast<std::size_t>(p)].phase = p;
  e.steps = 10;
  e.step_ms_total = 1000;
  e.phases[static_cast<std::size_t>(Phase::Forward)].device_ms_total = 300;
  e.phases[static_cast<std::size_t>(Phase::Backward)].device_ms_total = 500;
  e.phases[static_cast<std::size_t>(Phase::Forward)].wall_ms_total = 310;
  e.phases[static_cast<std::size_t>(Phase::Backward)].wall_ms_total = 520;
  return e;
}

AmpDeviceFacts h200() { return {true, "NVIDIA H200", 9, 0}; }

bool has(const std::vector<Unmeasured>& v, const std::string& what) {
  for (const auto& u : v)
    if (u.what == what) return true;
  return false;
}

std::string evidence(const Finding& f, const std::string& name) {
  for (const auto& e : f.evidence)
    if (e.name == name) return e.value;
  return "";
}

TEST(AmpAdvice, CpuGivesNoFindingAndSaysWhy) {
  std::vector<Unmeasured> nm;
  EXPECT_FALSE(mixed_precision_finding(epoch_with_device_times(), {}, nullptr, nm));
  ASSERT_TRUE(has(nm, "mixed-precision speed-up on CPU"));
  // Each epoch would call it again: the entry is not repeated.
  mixed_precision_finding(epoch_with_device_times(), {}, nullptr, nm);
  EXPECT_EQ(nm.size(), 1u);
}

TEST(AmpAdvice, CpuWithBf16UnitsSuggestsBf16WithoutInventingAGain) {
  std::vector<Unmeasured> nm;
  AmpDeviceFacts cpu;
  cpu.cpu_bf16_units = {"amx_bf16", "avx512_bf16"};
  const std::optional<Finding> f =
      mixed_precision_finding(epoch_with_device_times(), cpu, nullptr, nm);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->id, "precision.mixed");
  EXPECT_EQ(f->severity, Severity::Info);
  EXPECT_EQ(evidence(*f, "bf16 units (cpuinfo flags)"), "amx_bf16, avx512_bf16");
  EXPECT_NE(evidence(*f, "forward + backward host time (upper bound)"), "");
  EXPECT_FALSE(f->gain_fraction);  // no CPU peak table: no number
  EXPECT_NE(f->estimated_gain.find("not estimated"), std::string::npos) << f->estimated_gain;
  EXPECT_NE(f->fix.find("torch::kCPU"), std::string::npos);
  EXPECT_TRUE(has(nm, "mixed-precision speed-up on CPU"));
}

TEST(AmpAdvice, PreVoltaHasNoTensorCores) {
  std::vector<Unmeasured> nm;
  EXPECT_FALSE(
      mixed_precision_finding(epoch_with_device_times(), {true, "Tesla P100", 6, 0}, nullptr, nm));
  EXPECT_TRUE(has(nm, "mixed-precision speed-up"));
}

TEST(AmpAdvice, PhaseDeviceTimesBoundTheGainAndSaySoWithoutTensorCoreAnalysis) {
  std::vector<Unmeasured> nm;
  auto f = mixed_precision_finding(epoch_with_device_times(), h200(), nullptr, nm);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->id, finding_id::kMixedPrecision);
  EXPECT_NE(f->title.find("bf16"), std::string::npos);
  EXPECT_EQ(evidence(*f, "eligible time (upper bound)"), "800.0 ms, 80.0 % of step time");
  EXPECT_EQ(evidence(*f, "measured from"), "forward + backward device time (CUDA events)");
  EXPECT_TRUE(has(nm, "FP32 GEMM and convolution time on CUDA cores"));
  // Amdahl with H200's bf16 / fp32 peak ratio 989 / 67.
  const double bound = 1.0 / (0.2 + 0.8 / (989.0 / 67.0));
  ASSERT_TRUE(f->gain_fraction);
  EXPECT_NEAR(*f->gain_fraction, 1.0 - 1.0 / bound, 1e-9);
  EXPECT_EQ(f->severity, Severity::Warning);
  EXPECT_NE(f->fix.find("step.apply(optimizer)"), std::string::npos);
  EXPECT_NE(f->fix.find("fathom::AutocastScope autocast(torch::kCUDA)"), std::string::npos);
}

TEST(AmpAdvice, TensorCoreAnalysisGivesTheMeasuredShare) {
  TensorCoreResult tc;
  tc.kernel_ns = 100'000'000;
  tc.tensor_core_ns = 10'000'000;
  tc.share = 0.1;
  tc.ops_recorded = true;
  tc.eligible_cuda_core_ns = 60'000'000;
  tc.on_cuda_cores.push_back(
      {"aten::mm", "[64,512] [512,512]", "float float", "", 10, 10, 0, 60'000'000});
  std::vector<Unmeasured> nm;
  auto f = mixed_precision_finding(epoch_with_device_times(), {true, "Tesla V100-SXM2-16GB", 7, 0},
                                   &tc, nm);
  ASSERT_TRUE(f);
  EXPECT_NE(f->title.find("fp16"), std::string::npos);
  EXPECT_EQ(evidence(*f, "eligible time (measured)"), "60.0 ms, 60.0 % of GPU compute-kernel time");
  EXPECT_EQ(evidence(*f, "Tensor Core share of kernel time"), "10.0 %");
  EXPECT_NE(evidence(*f, "largest on CUDA cores").find("aten::mm"), std::string::npos);
  // The share is of kernel time, not step time: no step-time fraction is claimed.
  EXPECT_FALSE(f->gain_fraction);
  EXPECT_FALSE(has(nm, "FP32 GEMM and convolution time on CUDA cores"));
}

TEST(AmpAdvice, LittleEligibleWorkGivesNoFinding) {
  TensorCoreResult tc;
  tc.kernel_ns = 100'000'000;
  tc.tensor_core_ns = 90'000'000;
  tc.ops_recorded = true;
  tc.eligible_cuda_core_ns = 5'000'000;  // 5 %, under the 10 % threshold
  std::vector<Unmeasured> nm;
  EXPECT_FALSE(mixed_precision_finding(epoch_with_device_times(), h200(), &tc, nm));
}

TEST(AmpAdvice, UnknownGpuStillListsTheWorkButNoSpeedup) {
  std::vector<Unmeasured> nm;
  auto f =
      mixed_precision_finding(epoch_with_device_times(), {true, "Future GPU", 13, 0}, nullptr, nm);
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->gain_fraction);
  EXPECT_EQ(f->severity, Severity::Info);
  EXPECT_TRUE(has(nm, "peak 16-bit and FP32 throughput of this GPU"));
}

// --- the advisor's mixed-precision rules, from the typed section the AMP extension writes ------

const Finding* find(const std::vector<Finding>& fs, std::string_view id) {
  for (const Finding& f : fs)
    if (f.id == id) return &f;
  return nullptr;
}

Environment env_in(std::string_view mode) {
  Environment env;
  env.mode = mode_from_name(mode);
  return env;
}

MixedPrecisionSummary ran_bf16(std::string policy) {
  MixedPrecisionSummary m;
  m.policy = std::move(policy);
  m.state = "enabled";
  m.dtype = "bf16";
  m.steps_low_precision = 8;
  m.steps_fp32 = 2;
  m.events = {{1, AmpEventKind::Enabled, "after 2 fp32 steps"}};
  return m;
}

TEST(AmpAdvice, AppliedFlagFromTheTypedSummary) {
  EpochSummary e = epoch_with_device_times();
  e.mixed_precision = ran_bf16("auto");
  const std::vector<Finding> fs = advise(e, env_in("auto"));
  const Finding* f = find(fs, finding_id::kMixedPrecision);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->applied);
  EXPECT_EQ(f->severity, Severity::Info);
  EXPECT_EQ(evidence(*f, "steps in bf16"), "8 of 10");
  EXPECT_EQ(evidence(*f, "state"), "enabled");
  EXPECT_NE(f->fix.find("When::Always"), std::string::npos) << f->fix;
  EXPECT_EQ(find(fs, finding_id::kMixedPrecisionRolledBack), nullptr);
  // Forced on (When::Always): nothing to skip, no fix.
  e.mixed_precision = ran_bf16("on");
  EXPECT_EQ(find(advise(e, env_in("suggest")), finding_id::kMixedPrecision)->fix, "");
}

TEST(AmpAdvice, RolledBackFromTheTypedEvents) {
  EpochSummary e = epoch_with_device_times();
  MixedPrecisionSummary m = ran_bf16("auto");
  m.state = "rolled_back";
  m.skipped_steps = 2;
  m.events.push_back({39, AmpEventKind::RolledBack, "the loss drifted"});
  e.mixed_precision = m;
  const std::vector<Finding> fs = advise(e, env_in("auto"));
  const Finding* f = find(fs, finding_id::kMixedPrecisionRolledBack);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->id, "precision.rolled_back");
  EXPECT_EQ(f->severity, Severity::Warning);
  EXPECT_EQ(evidence(*f, "at step"), "39");
  EXPECT_EQ(evidence(*f, "because"), "the loss drifted");
  EXPECT_EQ(evidence(*f, "updates skipped on inf/NaN"), "2");
  EXPECT_NE(f->fix.find("tolerance(0.2)"), std::string::npos);
  EXPECT_EQ(find(fs, finding_id::kMixedPrecision), nullptr);  // rolled back: not "applied"
}

TEST(AmpAdvice, SuggestsFromTheSummaryInSuggestModeOnly) {
  EpochSummary e = epoch_with_device_times();
  MixedPrecisionSummary m;
  m.policy = "suggest";
  m.state = "fp32";
  m.steps_fp32 = 10;
  m.device = h200();
  e.mixed_precision = m;
  Environment env = env_in("suggest");
  const std::vector<Finding> fs = advise(e, env, env.not_measured);
  const Finding* f = find(fs, finding_id::kMixedPrecision);
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->applied);
  EXPECT_NE(evidence(*f, "device"), "");
  EXPECT_TRUE(has(env.not_measured, "FP32 GEMM and convolution time on CUDA cores"));
  // Auto decides by running it: no suggestion; nor without the device facts.
  EXPECT_EQ(find(advise(e, env_in("auto")), finding_id::kMixedPrecision), nullptr);
  e.mixed_precision->device.reset();
  EXPECT_EQ(find(advise(e, env_in("suggest")), finding_id::kMixedPrecision), nullptr);
}

}  // namespace
}  // namespace fathom
