#include <fathom/gpu_aggregator.h>
#include <fathom/tensor_core_analysis.h>
#include <gtest/gtest.h>

#include "synthetic_activity.h"

namespace fathom {
namespace {

using test::us;

TEST(TensorCoreAnalysis, ShareOfComputeKernelTime) {
  const TensorCoreResult r = analyze_tensor_cores(aggregate(test::one_step()));
  // Compute kernels: 100 + 100 + 100 + 5 + 50 us (NCCL left out); Tensor Cores: the two xmma.
  EXPECT_EQ(r.kernel_count, 5);
  EXPECT_EQ(r.kernel_ns, us(355));
  EXPECT_EQ(r.tensor_core_count, 2);
  EXPECT_EQ(r.tensor_core_ns, us(200));
  ASSERT_TRUE(r.share.has_value());
  EXPECT_DOUBLE_EQ(*r.share, 200.0 / 355.0);
}

TEST(TensorCoreAnalysis, PerPhase) {
  const TensorCoreResult r = analyze_tensor_cores(aggregate(test::one_step()));
  ASSERT_EQ(r.phases.size(), 2u);
  EXPECT_EQ(r.phases[0].phase, "forward");
  EXPECT_DOUBLE_EQ(*r.phases[0].share, 0.5);
  EXPECT_EQ(r.phases[1].phase, "backward");
  EXPECT_EQ(r.phases[1].kernel_ns, us(155));
  EXPECT_DOUBLE_EQ(*r.phases[1].share, 100.0 / 155.0);
}

TEST(TensorCoreAnalysis, FamiliesAndTopKernelsByTime) {
  const TensorCoreResult r = analyze_tensor_cores(aggregate(test::one_step()));
  ASSERT_EQ(r.families.size(), 3u);
  EXPECT_EQ(r.families[0].family, "xmma");
  EXPECT_EQ(r.families[0].total_ns, us(200));
  EXPECT_TRUE(r.families[0].tensor_core);
  EXPECT_EQ(r.families[1].family, "sgemm");
  EXPECT_EQ(r.families[2].family, "other");
  ASSERT_EQ(r.top_kernels.size(), 4u);
  EXPECT_EQ(r.top_kernels[0].name, test::kXmmaBf16);
  EXPECT_EQ(r.top_kernels[0].precision, "bf16");
}

TEST(TensorCoreAnalysis, EligibleOpsThatRanOnCudaCores) {
  const TensorCoreResult r = analyze_tensor_cores(aggregate(test::one_step()));
  EXPECT_TRUE(r.ops_recorded);
  EXPECT_EQ(r.eligible_instances, 3);
  EXPECT_EQ(r.eligible_with_kernels, 3);
  EXPECT_EQ(r.eligible_only_cuda_cores, 1);
  EXPECT_EQ(r.eligible_cuda_core_ns, us(100));
  ASSERT_EQ(r.on_cuda_cores.size(), 1u);
  EXPECT_EQ(r.on_cuda_cores[0].op, "aten::mm");
  EXPECT_EQ(r.on_cuda_cores[0].shapes, "[30,64] [64,128]");
  EXPECT_EQ(r.on_cuda_cores[0].dtypes, "float float");
  ASSERT_EQ(r.misaligned.size(), 1u);
  EXPECT_EQ(r.misaligned[0].misaligned, "M=30");
}

TEST(TensorCoreAnalysis, NoKernelsIsNoShareNotZero) {
  const TensorCoreResult r = analyze_tensor_cores(GpuAggregate{});
  EXPECT_FALSE(r.share.has_value());
  EXPECT_FALSE(r.ops_recorded);
  EXPECT_TRUE(r.phases.empty());
}

TEST(TensorCoreAnalysis, OnlyCommunicationIsNoShare) {
  GpuActivity act;
  act.kernels = {test::kernel(test::kNccl, 0, 100, 0)};
  const TensorCoreResult r = analyze_tensor_cores(aggregate(act));
  EXPECT_EQ(r.kernel_count, 0);
  EXPECT_FALSE(r.share.has_value());
}

TEST(TensorCoreAnalysis, Fp32LoopNearZeroBf16LoopHigh) {
  GpuActivity fp32, bf16;
  for (int i = 0; i < 100; ++i) {
    fp32.kernels.push_back(test::kernel(test::kSgemm, i * 100, i * 100 + 90, 0));
    fp32.kernels.push_back(test::kernel(test::kElementwise, i * 100 + 90, i * 100 + 95, 0));
    bf16.kernels.push_back(test::kernel(test::kXmmaBf16, i * 100, i * 100 + 90, 0));
    bf16.kernels.push_back(test::kernel(test::kElementwise, i * 100 + 90, i * 100 + 95, 0));
  }
  EXPECT_DOUBLE_EQ(*analyze_tensor_cores(aggregate(fp32)).share, 0.0);
  EXPECT_DOUBLE_EQ(*analyze_tensor_cores(aggregate(bf16)).share, 90.0 / 95.0);
}

}  // namespace
}  // namespace fathom
