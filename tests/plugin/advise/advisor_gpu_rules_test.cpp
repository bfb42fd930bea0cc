// GPU activity rules (advisor_gpu_rules.cpp), on GpuSummary results built by hand.
#include <fathom/gpu_summary.h>
#include <gtest/gtest.h>

#include "advise/advisor.h"
#include "advisor_fixtures.h"
#include "aggregate/gpu_aggregator.h"
#include "analyze/summarize_gpu.h"
#include "base/annotation_roles.h"

namespace fathom {
namespace {

using test::epoch_with;
using test::evidence;
using test::find;

constexpr std::int64_t ms = 1'000'000;

// Tensor Core time decided by name; the rest of the kernel time CUDA cores by name, or unknown.
void tensor_core_time(GpuSummary& g, std::int64_t tc_ns, std::int64_t unknown_ns = 0) {
  TensorCoreResult& t = g.tensor_cores;
  t.tensor_core_ns = tc_ns;
  t.share = static_cast<double>(tc_ns) / static_cast<double>(t.kernel_ns);
  t.decisions = {};
  t.decisions.tensor_cores_by_name.ns = tc_ns;
  t.decisions.unknown.ns = unknown_ns;
  t.decisions.cuda_cores_by_name.ns = t.kernel_ns - tc_ns - unknown_ns;
}

GpuSummary gpu_base() {
  GpuSummary g;
  g.source = "cupti";
  g.gpu_activity = true;
  g.devices.push_back({0, "NVIDIA H100", 9, 0, 80LL << 30});
  g.timeline.window_ns = 1000 * ms;
  g.timeline.steps = 10;
  DeviceTimeline d;
  d.busy_ns = 900 * ms;
  d.busy_share = 0.9;
  g.timeline.devices.push_back(d);
  g.tensor_cores.kernel_ns = 800 * ms;
  tensor_core_time(g, 600 * ms);
  return g;
}

EpochSummary with(const GpuSummary& g) {
  EpochSummary e = epoch_with(1000, 0);
  e.gpu = g;
  return e;
}

TEST(AdvisorGpu, EligibleFp32WorkOnCudaCoresFiresMixedPrecision) {
  GpuSummary g = gpu_base();
  tensor_core_time(g, 40 * ms);
  g.tensor_cores.ops_recorded = true;
  g.tensor_cores.eligible_instances = 50;
  g.tensor_cores.eligible_only_cuda_cores = 40;
  g.tensor_cores.eligible_cuda_core_ns = 300 * ms;
  EligibleOp op;
  op.op = "aten::addmm";
  op.shapes = "[[256, 1000], [1000, 1000]]";
  op.dtypes = "float";
  op.cuda_core_ns = 200 * ms;
  g.tensor_cores.on_cuda_cores.push_back(op);
  const auto f = find(advise(with(g), Environment{}), finding_id::kMixedPrecision);
  ASSERT_TRUE(f);
  EXPECT_EQ(evidence(*f, "Tensor Core share of kernel time")->value, "5.0 %");
  EXPECT_EQ(evidence(*f, "eligible ops only on CUDA cores")->value,
            "40 of 50 (37.5 % of kernel time)");
  EXPECT_EQ(evidence(*f, "largest")->value,
            "aten::addmm [[256, 1000], [1000, 1000]] float (200.00 ms on CUDA cores)");
  EXPECT_NEAR(*f->gain_fraction, 0.3, 1e-12);  // 300 ms of a 1000 ms window
  EXPECT_NE(f->fix.find("set_autocast_dtype(at::kCUDA, at::kBFloat16)"), std::string::npos);
}

TEST(AdvisorGpu, LowShareWithoutOpRecordsFiresMixedPrecision) {
  GpuSummary g = gpu_base();
  tensor_core_time(g, 0);
  const auto f = find(advise(with(g), Environment{}), finding_id::kMixedPrecision);
  ASSERT_TRUE(f);
  EXPECT_NEAR(*f->gain_fraction, 0.8, 1e-12);  // 800 ms of CUDA-core time in a 1000 ms window
  EXPECT_FALSE(evidence(*f, "undecided (kernel names say neither)"));
  // A little undecided time is said, and left out of the gain.
  tensor_core_time(g, 0, 40 * ms);
  const auto some = find(advise(with(g), Environment{}), finding_id::kMixedPrecision);
  ASSERT_TRUE(some);
  EXPECT_EQ(evidence(*some, "undecided (kernel names say neither)")->value, "5.0 % of kernel time");
  EXPECT_NEAR(*some->gain_fraction, 0.76, 1e-12);
}

// The AMP extension's typed section completes the GPU rules' finding: in Suggest mode the
// device's peak throughput and fathom's way to enable it; once it ran, the applied flag.
TEST(AdvisorGpu, MixedPrecisionFindingIsCompletedFromTheTypedAmpSection) {
  GpuSummary g = gpu_base();
  tensor_core_time(g, 0);
  EpochSummary e = with(g);
  MixedPrecisionSummary m;
  m.policy = "suggest";
  m.state = "fp32";
  m.steps_fp32 = 10;
  m.device = AmpDeviceFacts{true, "NVIDIA H100 80GB HBM3", 9, 0};
  e.mixed_precision = m;
  Environment env;
  env.mode = Mode::Suggest;
  const auto f = find(advise(e, env), finding_id::kMixedPrecision);
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->applied);
  EXPECT_EQ(evidence(*f, "device")->value, "NVIDIA H100 80GB HBM3 (compute capability 9.0)");
  ASSERT_TRUE(evidence(*f, "peak throughput"));
  EXPECT_NE(evidence(*f, "peak throughput")->value.find("TFLOPS bf16"), std::string::npos);
  EXPECT_NE(f->fix.find("// with fathom:"), std::string::npos);
  // Auto ran it for 6 of 10 steps: the same finding, applied, says so.
  e.mixed_precision->policy = "auto";
  e.mixed_precision->state = "enabled";
  e.mixed_precision->dtype = "bf16";
  e.mixed_precision->steps_low_precision = 6;
  e.mixed_precision->steps_fp32 = 4;
  env.mode = Mode::Auto;
  const auto applied = find(advise(e, env), finding_id::kMixedPrecision);
  ASSERT_TRUE(applied);
  EXPECT_TRUE(applied->applied);
  EXPECT_EQ(evidence(*applied, "steps in bf16")->value, "6 of 10");
  EXPECT_EQ(applied->title, f->title);  // the GPU rules' finding, not a second one
}

// Much undecided time: the low share may be the CUDA cores' or the unknown kernels' doing.
TEST(AdvisorGpu, LowShareWithMuchUndecidedTimeDoesNotFire) {
  GpuSummary g = gpu_base();
  tensor_core_time(g, 0, 400 * ms);
  EXPECT_FALSE(find(advise(with(g), Environment{}), finding_id::kMixedPrecision));
}

TEST(AdvisorGpu, TensorCoreWorkOrNoTensorCoresDoesNotFireMixedPrecision) {
  EXPECT_FALSE(find(advise(with(gpu_base()), Environment{}), finding_id::kMixedPrecision));
  GpuSummary g = gpu_base();
  tensor_core_time(g, 0);
  g.devices[0].compute_major = 6;  // Pascal: no Tensor Cores to move work to
  EXPECT_FALSE(find(advise(with(g), Environment{}), finding_id::kMixedPrecision));
  g = gpu_base();
  tensor_core_time(g, 0);
  g.gpu_activity = false;  // nothing recorded: no claim
  EXPECT_FALSE(find(advise(with(g), Environment{}), finding_id::kMixedPrecision));
}

// Kernels no rule names are not CUDA-core kernels: with nothing decided there is no evidence that
// matrix work missed the Tensor Cores.
TEST(AdvisorGpu, UnknownKernelsDoNotFireMixedPrecisionAsIfOnCudaCores) {
  GpuActivity a;
  a.devices.push_back({0, "NVIDIA H100", 9, 0, 80LL << 30});
  a.annotations.push_back(classified_annotation("ProfilerStep#1", 1, 0, 1'000'000));
  for (int i = 0; i < 10; ++i)
    a.kernels.push_back(
        {{.device = 0, .stream = 7, .start_ns = i * 90'000, .end_ns = i * 90'000 + 80'000},
         "void my_model::fused_block_kernel<__nv_bfloat16>(int)"});
  const GpuSummary g = summarize_gpu(aggregate(a));
  ASSERT_TRUE(g.tensor_cores.share.has_value());
  EXPECT_FALSE(find(advise(with(g), Environment{}), finding_id::kMixedPrecision));
}

GpuSummary with_h2d(double gb_per_s, double share_of_peak, std::int64_t bytes, std::int64_t count) {
  GpuSummary g = gpu_base();
  TransferDirection d;
  d.direction = MemcpyKind::HostToDevice;
  d.count = count;
  d.bytes = bytes;
  d.gb_per_s = gb_per_s;
  d.share_of_peak = share_of_peak;
  g.transfers.directions.push_back(d);
  g.transfers.link = {31.5, "PCIe gen4 x16"};
  return g;
}

TEST(AdvisorGpu, SlowLargeCopiesFireBelowLinkPeak) {
  const auto f = find(advise(with(with_h2d(3.15, 0.1, 100LL << 20, 10)), Environment{}),
                      finding_id::kTransferBelowLinkPeak);
  ASSERT_TRUE(f);
  EXPECT_EQ(evidence(*f, "share of peak")->value, "10.0 %");
  EXPECT_EQ(evidence(*f, "link")->value, "PCIe gen4 x16");
  EXPECT_EQ(f->estimated_gain, "copies up to 10.0x faster");
}

TEST(AdvisorGpu, FastOrSmallCopiesDoNotFireBelowLinkPeak) {
  EXPECT_FALSE(find(advise(with(with_h2d(25, 0.8, 100LL << 20, 10)), Environment{}),
                    finding_id::kTransferBelowLinkPeak));
  // 4 KiB copies are latency-bound: their bandwidth says nothing about the link.
  EXPECT_FALSE(find(advise(with(with_h2d(0.1, 0.003, 40960, 10)), Environment{}),
                    finding_id::kTransferBelowLinkPeak));
}

TEST(AdvisorGpu, PageableAndSyncCopiesFromGpuRecordsJoinTheHostFindings) {
  GpuSummary g = gpu_base();
  g.transfers.pageable_async_count = 7;
  g.transfers.large_sync_h2d_count = 3;
  EpochSummary e = with(g);
  auto fs = advise(e, Environment{});
  auto pageable = find(fs, finding_id::kCopyPageable);
  ASSERT_TRUE(pageable);
  EXPECT_EQ(evidence(*pageable, "async copies from pageable memory (GPU records)")->value, "7");
  ASSERT_TRUE(find(fs, finding_id::kCopySynchronous));
  // With fathom's copy helper reporting the same: one finding, both views.
  e.copies.push_back(CopySummary{CopyDirection::HostToDevice, false, true, 5, 5 << 20, 1.0});
  fs = advise(e, Environment{});
  int n = 0;
  for (const Finding& f : fs) n += f.id == finding_id::kCopyPageable;
  EXPECT_EQ(n, 1);
  pageable = find(fs, finding_id::kCopyPageable);
  EXPECT_TRUE(evidence(*pageable, "pageable copies"));
  EXPECT_TRUE(evidence(*pageable, "async copies from pageable memory (GPU records)"));
}

TEST(AdvisorGpu, PinnedAsyncCopiesDoNotFire) {
  const auto fs = advise(with(gpu_base()), Environment{});
  EXPECT_FALSE(find(fs, finding_id::kCopyPageable));
  EXPECT_FALSE(find(fs, finding_id::kCopySynchronous));
}

TEST(AdvisorGpu, ExposedTransfersFireOverlappedDoNot) {
  GpuSummary g = gpu_base();
  g.transfers.share_of_window = 0.2;
  g.transfers.overlap_share = 0.1;
  const auto f = find(advise(with(g), Environment{}), finding_id::kTransferExposed);
  ASSERT_TRUE(f);
  EXPECT_NEAR(*f->gain_fraction, 0.18, 1e-12);
  EXPECT_NE(f->fix.find("getStreamFromPool"), std::string::npos);
  g.transfers.overlap_share = 0.9;
  EXPECT_FALSE(find(advise(with(g), Environment{}), finding_id::kTransferExposed));
}

TEST(AdvisorGpu, HostSyncsInsideTheStepFire) {
  GpuSummary g = gpu_base();
  g.timeline.sync_calls = 100;
  g.timeline.sync_call_ns = 100 * ms;
  g.timeline.devices[0].idle.sync_ns = 60 * ms;
  const auto f = find(advise(with(g), Environment{}), finding_id::kHostSync);
  ASSERT_TRUE(f);
  EXPECT_EQ(evidence(*f, "synchronizations")->value, "100 (10.0 per step)");
  EXPECT_NEAR(*f->gain_fraction, 0.1, 1e-12);
  EXPECT_NE(f->fix.find("loss.detach()"), std::string::npos);
}

TEST(AdvisorGpu, RareShortSyncsDoNotFire) {
  GpuSummary g = gpu_base();
  g.timeline.sync_calls = 1;
  g.timeline.sync_call_ns = 10 * ms;  // 1 % of the window
  EXPECT_FALSE(find(advise(with(g), Environment{}), finding_id::kHostSync));
}

TEST(AdvisorGpu, ManyTinyKernelsOnAnIdleGpuAreLaunchBound) {
  GpuSummary g = gpu_base();
  g.timeline.kernel_count = 20000;
  g.timeline.tiny_kernel_count = 16000;
  g.timeline.tiny_count_share = 0.8;
  g.timeline.devices[0].busy_share = 0.35;
  g.timeline.devices[0].idle.host_launch_ns = 400 * ms;
  g.timeline.launches_recorded = true;
  const auto f = find(advise(with(g), Environment{}), finding_id::kLaunchBound);
  ASSERT_TRUE(f);
  EXPECT_EQ(evidence(*f, "kernels")->value, "20000 (2000 per step)");
  EXPECT_EQ(evidence(*f, "shorter than 10 us")->value, "80.0 %");
  EXPECT_NEAR(*f->gain_fraction, 0.4, 1e-12);
  EXPECT_NE(f->fix.find("CUDAGraph"), std::string::npos);
}

TEST(AdvisorGpu, TinyKernelsOnABusyGpuAreNotLaunchBound) {
  GpuSummary g = gpu_base();
  g.timeline.tiny_count_share = 0.8;  // busy 90 %
  EXPECT_FALSE(find(advise(with(g), Environment{}), finding_id::kLaunchBound));
}

TEST(AdvisorGpu, LargeUnoverlappedCommunicationIsCritical) {
  GpuSummary g = gpu_base();
  g.timeline.communication_kernels = 40;
  g.timeline.communication_ns = 250 * ms;
  g.timeline.communication_share = 0.25;
  g.timeline.devices[0].communication_ns = 250 * ms;
  g.timeline.devices[0].communication_overlap_ns = 25 * ms;
  const auto f = find(advise(with(g), Environment{}), finding_id::kCommunication);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::Critical);
  EXPECT_EQ(evidence(*f, "overlapped with compute")->value, "10.0 %");
  EXPECT_NEAR(*f->gain_fraction, 0.225, 1e-12);
}

TEST(AdvisorGpu, SmallOrHiddenCommunicationDoesNotFire) {
  GpuSummary g = gpu_base();
  g.timeline.communication_kernels = 40;
  g.timeline.communication_share = 0.04;
  g.timeline.devices[0].communication_ns = 40 * ms;
  g.timeline.devices[0].communication_overlap_ns = 2 * ms;
  EXPECT_FALSE(find(advise(with(g), Environment{}), finding_id::kCommunication));
  g.timeline.communication_share = 0.3;
  g.timeline.devices[0].communication_overlap_ns = 0;
  g.timeline.devices[0].communication_ns = 0;  // overlap unknown, share large: still fires
  EXPECT_TRUE(find(advise(with(g), Environment{}), finding_id::kCommunication));
}

TEST(AdvisorGpu, BatchHeadroomUsesTheTimelineBusyShare) {
  GpuSummary g = gpu_base();
  g.timeline.devices[0].busy_share = 0.3;
  EpochSummary e = with(g);
  e.telemetry = test::busy_telemetry();  // NVML says 90 % busy, 50 % memory
  e.telemetry->memory_used_bytes_max = 20LL << 30;
  const auto f = find(advise(e, Environment{}), finding_id::kBatchHeadroom);
  ASSERT_TRUE(f);
  EXPECT_EQ(evidence(*f, "GPU busy")->value, "30.0 %");
  EXPECT_EQ(evidence(*f, "GPU busy measured as")->value,
            "GPU records: kernel, copy and memset time over the steps");
}

}  // namespace
}  // namespace fathom
