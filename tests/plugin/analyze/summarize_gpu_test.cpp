#include "analyze/summarize_gpu.h"

#include <fathom/gpu_summary.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "aggregate/gpu_aggregator.h"
#include "synthetic_activity.h"

namespace fathom {
namespace {

bool says_not_measured(const GpuSummary& s, const std::string& what) {
  for (const Unmeasured& u : s.not_measured)
    if (u.what == what) return true;
  return false;
}

TEST(GpuSummary, RunsTheThreeAnalyses) {
  GpuSummaryOptions o;
  o.source = "synthetic";
  o.link = LinkPeak{31.5, "PCIe gen4 x16"};
  const GpuSummary s = summarize_gpu(aggregate(test::one_step()), o);
  EXPECT_TRUE(s.gpu_activity);
  EXPECT_EQ(s.source, "synthetic");
  EXPECT_EQ(s.records, 25);
  EXPECT_DOUBLE_EQ(*s.tensor_cores.share, 200.0 / 355.0);
  EXPECT_EQ(s.transfers.count, 1);
  EXPECT_DOUBLE_EQ(*s.transfers.directions[0].share_of_peak, 0.1 / 31.5);
  EXPECT_DOUBLE_EQ(*s.timeline.devices[0].busy_share, 0.48);
  EXPECT_EQ(s.devices.at(0).name, "NVIDIA A100-SXM4-80GB");
  EXPECT_TRUE(s.not_measured.empty());
}

TEST(GpuSummary, SaysWhatWasNotMeasured) {
  GpuActivity a = test::one_step();
  a.ops.clear();
  a.runtime_calls.clear();
  a.annotations.clear();
  a.dropped_records = 9;
  const GpuSummary s = summarize_gpu(aggregate(a));
  EXPECT_TRUE(says_not_measured(s, "transfer bandwidth against the link peak"));
  EXPECT_TRUE(says_not_measured(s, "Tensor-Core-eligible ops on CUDA cores"));
  EXPECT_TRUE(says_not_measured(s, "idle time from late launches"));
  EXPECT_TRUE(says_not_measured(s, "busy share of step time"));
  EXPECT_EQ(s.dropped_records, 9);
}

TEST(GpuSummary, NoGpuActivityIsSaidNotZeroed) {
  GpuActivity a;
  a.annotations = {test::annotation("ProfilerStep#1", 0, 100)};
  const GpuSummary s = summarize_gpu(aggregate(a));
  EXPECT_FALSE(s.gpu_activity);
  ASSERT_EQ(s.not_measured.size(), 1u);
  EXPECT_EQ(s.not_measured[0].what, "GPU activity");
  EXPECT_FALSE(s.tensor_cores.share.has_value());
}

// Much unknown kernel time, ops without types: the summary says so and how to decide them.
TEST(GpuSummary, UnknownKernelsAreSaidWithTheWayToDecideThem) {
  GpuActivity a = test::one_step();
  a.kernels.push_back(test::kernel("void ext::fast_gemm_kernel<128, 128, 32>(Args)", 900, 990, 0));
  for (OpRecord& o : a.ops) o.input_dtypes.clear();
  const GpuSummary s = summarize_gpu(aggregate(a));
  ASSERT_TRUE(says_not_measured(s, "Tensor Core use of some kernels"));
  const auto it =
      std::find_if(s.not_measured.begin(), s.not_measured.end(),
                   [](const Unmeasured& u) { return u.what == "Tensor Core use of some kernels"; });
  EXPECT_NE(it->why.find("FATHOM_RECORD_SHAPES=on (Options::record_shapes;"), std::string::npos)
      << it->why;
  EXPECT_NE(it->why.find("20.2% of compute-kernel time"), std::string::npos) << it->why;
  EXPECT_FALSE(says_not_measured(summarize_gpu(aggregate(test::one_step())),
                                 "Tensor Core use of some kernels"));
}

TEST(GpuSummary, LateRecordsAreSaid) {
  GpuAggregator agg;
  agg.add(test::one_step());
  agg.flush();
  agg.add(test::one_step().kernels[0]);
  EXPECT_TRUE(says_not_measured(summarize_gpu(agg.snapshot()), "timeline of late records"));
}

}  // namespace
}  // namespace fathom
