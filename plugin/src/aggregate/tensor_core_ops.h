#pragma once
// Which ATen ops could run on Tensor Cores (GEMMs, convolutions and fused attention, forward and
// backward), which of their dimensions keep them off, and what an op's input types say about the
// kernels it launched: cuBLAS and cuDNN pick Tensor Core kernels for 16-bit types when the GEMM's
// M, N, K (a convolution's input and output channels) are multiples of 8.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "aggregate/kernel_classifier.h"

namespace fathom {

// aten::mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _scaled_grouped_mm, conv*/convolution,
// scaled_dot_product_attention and its flash / efficient / cudnn variants, and their backward
// (aten::convolution_backward, cudnn_convolution_backward*, MmBackward0, AddmmBackward0,
// ScaledDotProductFlashAttentionBackward0, ...).
bool tensor_core_eligible_op(std::string_view op_name) noexcept;

// The dimensions of an eligible op that are not multiples of 8, as "K=30 N=1001"; empty when
// all are, or when the shapes do not say (not recorded, or an op whose layout is not known).
std::string dims_not_multiple_of_8(std::string_view op_name,
                                   const std::vector<std::vector<std::int64_t>>& input_shapes);

// An op's tensor inputs, as the aggregator keys and reports them: "[64,3,224,224] [64,3,7,7]" and
// "float float". Inputs without a shape (scalars, lists, flags) are left out.
std::string op_shapes_text(const std::vector<std::vector<std::int64_t>>& shapes);
std::string op_dtypes_text(const std::vector<std::vector<std::int64_t>>& shapes,
                           const std::vector<std::string>& dtypes);
// The same texts appended to out (the aggregator's key, built without allocating).
void append_op_shapes_text(std::string& out, const std::vector<std::vector<std::int64_t>>& shapes);
void append_op_dtypes_text(std::string& out, const std::vector<std::vector<std::int64_t>>& shapes,
                           const std::vector<std::string>& dtypes);

// Some input is a 16- or 8-bit type Tensor Cores compute in: c10::Half, c10::BFloat16,
// c10::Float8_e4m3fn (and the other Float8 / Float4 types), signed char (int8). The operands of
// a GEMM, convolution or attention share their type; fp32 inputs beside them are scales.
bool tensor_core_input_types(const std::vector<std::string>& dtypes) noexcept;

// A kernel the name leaves undecided, launched inside an eligible op with such inputs, on sm_80+:
// cuBLAS, cuDNN and the attention backends run 16- and 8-bit GEMM work on Tensor Cores there.
// Not when the name says fp32 / fp64 (a type token), which the table leaves undecided too.
bool tensor_core_by_op(const KernelClass& kernel, ComputeCapability device,
                       bool op_has_tensor_core_inputs) noexcept;

}  // namespace fathom
