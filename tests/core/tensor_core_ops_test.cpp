#include <fathom/tensor_core_ops.h>
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
