#include <fathom/gpu_summary.h>
#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include "aggregate/gpu_aggregator.h"
#include "analyze/summarize_gpu.h"
#include "sample_report.h"
#include "synthetic_activity.h"

namespace fathom {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

GpuSummary summary(LinkPeak link = {}) {
  GpuSummaryOptions o;
  o.source = "cupti";
  o.link = link;
  return summarize_gpu(aggregate(test::one_step()), o);
}

TEST(GpuSummaryTerminal, TensorCoreShareByPhase) {
  const std::string t = format_gpu_summary_text(summary());
  EXPECT_TRUE(has(t, "GPU (cupti) | device 0: NVIDIA A100-SXM4-80GB sm_80")) << t;
  EXPECT_TRUE(
      has(t, "Tensor Cores: 56.3% of compute-kernel time (0.20 ms of 0.35 ms; 2 of 5 kernels)"))
      << t;
  EXPECT_TRUE(has(t, "forward 50.0% of 0.20 ms  backward 64.5% of 0.15 ms")) << t;
  EXPECT_TRUE(has(t,
                  "decided by name: Tensor Cores 0.20 ms, CUDA cores 0.15 ms; by op: Tensor Cores "
                  "0.00 ms; unknown 0.00 ms (0.0%, 0 kernels)"))
      << t;
  EXPECT_TRUE(has(t,
                  "kernel families: xmma 0.20 ms (TC), sgemm 0.10 ms (CUDA cores), "
                  "elementwise 0.06 ms (CUDA cores)"))
      << t;
  EXPECT_TRUE(has(t, "ran only on CUDA cores: 1 of 3 with kernels (0.10 ms)")) << t;
  EXPECT_TRUE(has(t, "aten::mm x1 (M=30) [30,64] [64,128] float float")) << t;
}

// Unknown kernels are said apart from the CUDA cores, per phase and per family, with what an op
// decided of them.
TEST(GpuSummaryTerminal, UnknownAndByOpDecisions) {
  GpuActivity a = test::one_step();
  a.ops.push_back(test::op("aten::mm", 846, 849, 200, {{64, 64}, {64, 64}},
                           {"c10::BFloat16", "c10::BFloat16"}));
  a.runtime_calls.push_back(test::call("cudaLaunchKernel", 847, 848, 8));
  a.kernels.push_back(test::kernel("void ext::fast_gemm_kernel<128, 128, 32>(Args)", 900, 960, 8));
  a.kernels.push_back(test::kernel("void ext::fast_gemm_kernel<128, 128, 32>(Args)", 960, 990, 0));
  const std::string t = format_gpu_summary_text(summarize_gpu(aggregate(a)));
  EXPECT_TRUE(has(t,
                  "decided by name: Tensor Cores 0.20 ms, CUDA cores 0.15 ms; by op: Tensor Cores "
                  "0.06 ms; unknown 0.03 ms (6.7%, 1 kernel)"))
      << t;
  EXPECT_TRUE(has(t, "other 0.09 ms (unknown; TC by op 0.06 ms)")) << t;
  EXPECT_TRUE(has(t, "(0.03 ms unknown)")) << t;
}

// A host sync reaches fathom twice, as the runtime call and as CUPTI's record of the wait: the
// line counts it once, as the advisor's rule does (helper's replay of the Nsight exports: 32
// syncs printed 64).
TEST(GpuSummaryTerminal, ASyncSeenAsItsCallAndItsRecordCountsOnce) {
  GpuSummary g = summary();
  g.timeline.sync_calls = 16;
  g.timeline.sync_records = 16;
  g.timeline.sync_call_ns = 2'000'000;
  g.timeline.sync_record_ns = 1'900'000;
  const std::string t = format_gpu_summary_text(g);
  EXPECT_TRUE(has(t, "host syncs 16 (2.00 ms)")) << t;
}

TEST(GpuSummaryTerminal, TransferTableWithPageablePinnedSplit) {
  const std::string t = format_gpu_summary_text(summary(LinkPeak{1.0, "PCIe gen1 x4"}));
  EXPECT_TRUE(
      has(t,
          "transfers: 1 copy, 7.8 KiB, 0.08 ms busy (8.0% of the window), 0.0% of it while kernels "
          "ran; link: PCIe gen1 x4 (1.0 GB/s)"))
      << t;
  EXPECT_TRUE(has(t, "HtoD   pageable  async        1     7.8 KiB     0.08 ms     0.10   10.0%"))
      << t;
  EXPECT_TRUE(has(t, "HtoD: pageable 7.8 KiB (1), pinned 0 B (0)")) << t;
  EXPECT_TRUE(has(t, "1 asynchronous copy from pageable memory")) << t;
}

TEST(GpuSummaryTerminal, BusyIdleBreakdown) {
  const std::string t = format_gpu_summary_text(summary());
  EXPECT_TRUE(has(t, "timeline: window 1.00 ms (1 step)")) << t;
  EXPECT_TRUE(
      has(t,
          "device 0: busy 48.0% | idle 52.0%: data wait 20.0%, synchronization 5.0%, late launches "
          "(host-bound) 17.0%, other 10.0% (4 gaps)"))
      << t;
  EXPECT_TRUE(has(
      t,
      "kernels 6, tiny (<10 us): 16.7% of them, 1.1% of kernel time; launch calls 6, host syncs 1"))
      << t;
  EXPECT_TRUE(has(t,
                  "communication (NCCL) on device 0: 0.10 ms (10.0% of the window), 55.0% "
                  "overlapped with compute"))
      << t;
}

TEST(GpuSummaryTerminal, UnknownPeakAndNoActivityAreSaid) {
  EXPECT_TRUE(has(format_gpu_summary_text(summary()),
                  "not measured: transfer bandwidth against the link peak"));
  const std::string none = format_gpu_summary_text(summarize_gpu(aggregate(GpuActivity{})));
  EXPECT_TRUE(has(none, "no GPU activity")) << none;
  EXPECT_FALSE(has(none, "Tensor Cores")) << none;
}

TEST(GpuSummaryTerminal, DroppedRecordsAreSaid) {
  GpuSummary s = summary();
  s.dropped_records = 7;
  EXPECT_TRUE(has(format_gpu_summary_text(s),
                  "dropped records: 7 of 32 (the totals above are lower bounds)"));
}

TEST(GpuSummaryTerminal, ReportShowsTheSectionInTheEpoch) {
  RunReport r = test::sample_report();
  EXPECT_FALSE(has(format_terminal_report(r), "GPU activity"));
  r.epochs[0].gpu = summary();
  const std::string t = format_terminal_report(r);
  EXPECT_TRUE(has(t, "\nGPU activity\n")) << t;
  EXPECT_TRUE(has(t, "Tensor Cores: 56.3%")) << t;
}

}  // namespace
}  // namespace fathom
