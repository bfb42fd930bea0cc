#include "aggregate/tensor_core_ops.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

TEST(TensorCoreOps, EligibleNames) {
  for (const char* n :
       {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
        "aten::conv2d", "aten::convolution", "aten::_convolution", "aten::cudnn_convolution",
        "aten::convolution_backward", "aten::cudnn_convolution_backward_weight", "MmBackward0",
        "AddmmBackward0", "ConvolutionBackward0", "CudnnConvolutionBackward"})
    EXPECT_TRUE(tensor_core_eligible_op(n)) << n;
  for (const char* n :
       {"aten::add", "aten::mul", "aten::_conv_depthwise2d_placeholder", "aten::mmx",
        "autograd::engine::evaluate_function: MmBackward0", "aten::copy_", ""})
    EXPECT_FALSE(tensor_core_eligible_op(n)) << n;
}

// Fused attention and grouped / scaled GEMMs are Tensor Core work too: their kernels can be decided
// by op, and the op hooks record them.
TEST(TensorCoreOps, AttentionAndGroupedGemmsAreEligible) {
  for (const char* n :
       {"aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention_backward",
        "aten::_scaled_dot_product_cudnn_attention", "aten::_flash_attention_forward",
        "aten::_efficient_attention_backward", "aten::_scaled_mm", "aten::_scaled_grouped_mm",
        "ScaledDotProductFlashAttentionBackward0", "ScaledDotProductEfficientAttentionBackward0"})
    EXPECT_TRUE(tensor_core_eligible_op(n)) << n;
  EXPECT_FALSE(tensor_core_eligible_op("aten::softmax"));
  EXPECT_FALSE(tensor_core_eligible_op("aten::_softmax_backward_data"));
}

TEST(TensorCoreOps, SixteenAndEightBitInputTypes) {
  EXPECT_TRUE(tensor_core_input_types({"c10::BFloat16", "c10::BFloat16"}));
  EXPECT_TRUE(tensor_core_input_types({"c10::Half"}));
  EXPECT_TRUE(tensor_core_input_types({"Half", "Half"}));  // ScalarType names
  // _scaled_mm: fp8 operands, fp32 scales.
  EXPECT_TRUE(
      tensor_core_input_types({"c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float"}));
  EXPECT_TRUE(tensor_core_input_types({"signed char", "signed char"}));  // _int_mm
  EXPECT_FALSE(tensor_core_input_types({"float", "float"}));
  EXPECT_FALSE(tensor_core_input_types({"double", "long int", "bool", "unsigned char"}));
  EXPECT_FALSE(tensor_core_input_types({}));
}

TEST(TensorCoreOps, AnOpDecidesOnlyWhatTheNameLeftOpen) {
  const KernelClass unknown = classify_kernel("void ext::fast_gemm_kernel<128, 128, 32>(Args)");
  const ComputeCapability ampere{8, 0}, volta{7, 0};
  EXPECT_TRUE(tensor_core_by_op(unknown, ampere, true));
  EXPECT_FALSE(tensor_core_by_op(unknown, ampere, false));              // fp32 inputs
  EXPECT_FALSE(tensor_core_by_op(unknown, volta, true));                // below sm_80
  EXPECT_FALSE(tensor_core_by_op(unknown, ComputeCapability{}, true));  // device unknown
  // The name decided already, or says fp32: the op does not overrule it.
  EXPECT_FALSE(tensor_core_by_op(classify_kernel("volta_sgemm_64x64_nt"), ampere, true));
  EXPECT_FALSE(tensor_core_by_op(
      classify_kernel("void at::native::vectorized_elementwise_kernel<4, AddFunctor<c10::Half>>"),
      ampere, true));
  EXPECT_FALSE(tensor_core_by_op(classify_kernel("void my_gemm<float>(float const*, float*)"),
                                 ampere, true));
}

TEST(TensorCoreOps, InputText) {
  EXPECT_EQ(op_shapes_text({{128}, {}, {64, 128}}), "[128] [64,128]");
  EXPECT_EQ(op_dtypes_text({{128}, {}, {64, 128}}, {"float", "", "c10::Half"}), "float c10::Half");
}

TEST(TensorCoreOps, GemmDims) {
  EXPECT_EQ(dims_not_multiple_of_8("aten::mm", {{30, 64}, {64, 1000}}), "M=30");
  EXPECT_EQ(dims_not_multiple_of_8("aten::mm", {{32, 64}, {64, 1001}}), "N=1001");
  EXPECT_EQ(dims_not_multiple_of_8("aten::addmm", {{1000}, {32, 30}, {30, 1000}}), "K=30");
  EXPECT_EQ(dims_not_multiple_of_8("aten::bmm", {{12, 7, 64}, {12, 64, 9}}), "M=7 N=9");
  EXPECT_EQ(dims_not_multiple_of_8("aten::mm", {{32, 64}, {64, 128}}), "");
}

TEST(TensorCoreOps, LinearFoldsLeadingDimsIntoM) {
  // x [4, 25, 64] -> M = 100; weight [10, 64] -> N = 10.
  EXPECT_EQ(dims_not_multiple_of_8("aten::linear", {{4, 25, 64}, {10, 64}, {10}}), "M=100 N=10");
}

TEST(TensorCoreOps, ConvolutionChannels) {
  EXPECT_EQ(dims_not_multiple_of_8("aten::cudnn_convolution", {{64, 3, 224, 224}, {64, 3, 7, 7}}),
            "C_in=3");
  EXPECT_EQ(dims_not_multiple_of_8("aten::convolution_backward",
                                   {{64, 60, 56, 56}, {64, 64, 56, 56}, {60, 64, 3, 3}}),
            "C_out=60");
}

TEST(TensorCoreOps, UnknownShapesSayNothing) {
  EXPECT_EQ(dims_not_multiple_of_8("aten::mm", {}), "");
  EXPECT_EQ(dims_not_multiple_of_8("aten::mm", {{}, {}}), "");
  EXPECT_EQ(dims_not_multiple_of_8("MmBackward0", {{30, 30}}), "");
}

}  // namespace
}  // namespace fathom
