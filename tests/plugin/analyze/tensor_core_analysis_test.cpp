#include "analyze/tensor_core_analysis.h"

#include <gtest/gtest.h>

#include "aggregate/gpu_aggregator.h"
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
  // Every kernel's name decides: sgemm and the elementwise helpers are CUDA cores by name.
  EXPECT_EQ(r.decisions.tensor_cores_by_name.ns, us(200));
  EXPECT_EQ(r.decisions.cuda_cores_by_name.ns, us(155));
  EXPECT_EQ(r.decisions.cuda_cores_by_name.count, 3);
  EXPECT_EQ(r.decisions.unknown.count, 0);
  EXPECT_DOUBLE_EQ(*r.unknown_share, 0.0);
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
  EXPECT_EQ(r.families[2].family, "elementwise");
  EXPECT_EQ(r.families[2].decision, "name");
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

// A kernel no rule names, launched by a 16-bit GEMM on an Ampere GPU: cuBLAS-class libraries run
// such GEMMs on Tensor Cores, so the op decides what the name cannot. The same kernel under an
// fp32 op, and a helper kernel under the 16-bit one, stay off Tensor Cores.
GpuActivity unknown_gemm_kernels(int compute_major) {
  GpuActivity a;
  a.devices.push_back(DeviceProperties{0, "NVIDIA A100-SXM4-80GB", compute_major, 0, 80LL << 30});
  const char* gemm = "void ext::fast_gemm_kernel<128, 128, 32>(ext::GemmArgs)";
  a.ops = {test::op("aten::mm", 0, 10, 1, {{64, 64}, {64, 64}}, {"c10::BFloat16", "c10::BFloat16"}),
           test::op("aten::mm", 20, 30, 2, {{64, 64}, {64, 64}}, {"float", "float"})};
  a.kernels = {test::kernel(gemm, 100, 200, 11, 1),
               test::kernel(test::kElementwise, 200, 210, 12, 1),
               test::kernel(gemm, 300, 350, 13, 2)};
  return a;
}

TEST(TensorCoreAnalysis, UnknownKernelOfA16BitGemmOnAmpereIsTensorCoreByOp) {
  const TensorCoreResult r = analyze_tensor_cores(aggregate(unknown_gemm_kernels(8)));
  EXPECT_EQ(r.kernel_ns, us(160));
  EXPECT_EQ(r.tensor_core_ns, us(100));
  EXPECT_EQ(r.tensor_core_count, 1);
  EXPECT_EQ(r.eligible_only_cuda_cores, 0);  // the fp32 mm's kernel is unknown, not CUDA cores
}

TEST(TensorCoreAnalysis, DecisionsSplitTimeAndCount) {
  const TensorCoreResult r = analyze_tensor_cores(aggregate(unknown_gemm_kernels(8)));
  const TensorCoreDecisions& d = r.decisions;
  EXPECT_EQ(d.tensor_cores_by_op.count, 1);
  EXPECT_EQ(d.tensor_cores_by_op.ns, us(100));
  EXPECT_EQ(d.cuda_cores_by_name.count, 1);  // the elementwise helper
  EXPECT_EQ(d.cuda_cores_by_name.ns, us(10));
  EXPECT_EQ(d.unknown.count, 1);  // the same kernel under the fp32 mm
  EXPECT_EQ(d.unknown.ns, us(50));
  EXPECT_EQ(d.tensor_cores_by_name.count, 0);
  EXPECT_DOUBLE_EQ(*r.unknown_share, 50.0 / 160.0);
  EXPECT_TRUE(r.op_dtypes_recorded);
  EXPECT_EQ(r.eligible_unknown_ns, us(50));
  ASSERT_EQ(r.phases.size(), 1u);
  EXPECT_EQ(r.phases[0].unknown_ns, us(50));
  EXPECT_EQ(r.phases[0].tensor_core_ns, us(100));
  const KernelFamilyTime& other = r.families.at(0);
  EXPECT_EQ(other.family, "other");
  EXPECT_EQ(other.decision, "unknown");
  EXPECT_EQ(other.total_ns, us(150));
  EXPECT_EQ(other.tensor_core_by_op_ns, us(100));
  EXPECT_EQ(r.top_kernels.at(0).decision, "unknown");
  EXPECT_EQ(r.top_kernels.at(0).tensor_core_by_op_ns, us(100));
}

TEST(TensorCoreAnalysis, BelowAmpereOrWithoutTypesTheOpDecidesNothing) {
  TensorCoreResult volta = analyze_tensor_cores(aggregate(unknown_gemm_kernels(7)));
  EXPECT_EQ(volta.tensor_core_ns, 0);
  EXPECT_EQ(volta.decisions.unknown.ns, us(150));
  GpuActivity a = unknown_gemm_kernels(8);
  for (OpRecord& o : a.ops) o.input_dtypes.clear();  // shapes recorded, types not
  const TensorCoreResult untyped = analyze_tensor_cores(aggregate(a));
  EXPECT_EQ(untyped.tensor_core_ns, 0);
  EXPECT_FALSE(untyped.op_dtypes_recorded);
  EXPECT_NE(undecided_kernels_note(untyped).find("FATHOM_RECORD_SHAPES=on"), std::string::npos)
      << undecided_kernels_note(untyped);
  // With types recorded the note does not ask for them.
  EXPECT_EQ(undecided_kernels_note(volta).find("FATHOM_RECORD_SHAPES"), std::string::npos);
}

TEST(TensorCoreAnalysis, FusedAttentionWithoutArchitectureIsUnknownAndSaysWhy) {
  GpuActivity a;  // a trace without deviceProperties
  a.kernels = {test::kernel("fmha_cutlassB_bf16_aligned_128x128_k128(Params)", 0, 100, 1),
               test::kernel(test::kXmmaBf16, 100, 150, 2)};
  const TensorCoreResult r = analyze_tensor_cores(aggregate(a));
  EXPECT_EQ(r.decisions.unknown.ns, us(100));
  EXPECT_EQ(r.decisions.unknown_without_capability.ns, us(100));
  EXPECT_NE(undecided_kernels_note(r).find("compute capability"), std::string::npos);
  a.devices.push_back(DeviceProperties{0, "NVIDIA H100", 9, 0, 80LL << 30});
  const TensorCoreResult hopper = analyze_tensor_cores(aggregate(a));
  EXPECT_EQ(hopper.decisions.unknown.ns, 0);
  EXPECT_EQ(hopper.decisions.tensor_cores_by_name.ns, us(150));
  EXPECT_TRUE(undecided_kernels_note(hopper).empty());
}

}  // namespace
}  // namespace fathom
