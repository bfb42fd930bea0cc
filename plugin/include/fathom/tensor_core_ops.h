#pragma once
// Which ATen ops could run on Tensor Cores (GEMMs and convolutions, forward and backward), and
// which of their dimensions keep them off: cuBLAS and cuDNN pick Tensor Core kernels for 16-bit
// types when the GEMM's M, N, K (a convolution's input and output channels) are multiples of 8.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

// aten::mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, conv*/convolution and their backward
// (aten::convolution_backward, cudnn_convolution_backward*, MmBackward0, AddmmBackward0, ...).
bool tensor_core_eligible_op(std::string_view op_name) noexcept;

// The dimensions of an eligible op that are not multiples of 8, as "K=30 N=1001"; empty when
// all are, or when the shapes do not say (not recorded, or an op whose layout is not known).
std::string dims_not_multiple_of_8(std::string_view op_name,
                                   const std::vector<std::vector<std::int64_t>>& input_shapes);

}  // namespace fathom
