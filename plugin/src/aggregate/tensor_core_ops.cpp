#include "aggregate/tensor_core_ops.h"

#include <charconv>
#include <utility>

namespace fathom {
namespace {

constexpr std::string_view kAtenOps[] = {
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "addbmm",
    "matmul",
    "linear",
    "_scaled_mm",
    "_scaled_grouped_mm",
    "_grouped_mm",
    "conv1d",
    "conv2d",
    "conv3d",
    "convolution",
    "_convolution",
    "cudnn_convolution",
    "cudnn_convolution_relu",
    "cudnn_convolution_add_relu",
    "cudnn_convolution_transpose",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "convolution_backward",
    "cudnn_convolution_backward",
    "cudnn_convolution_backward_input",
    "cudnn_convolution_backward_weight",
    "cudnn_convolution_transpose_backward",
    // Fused attention: the dispatcher op, the backend ops it picks, and their backward.
    "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_cudnn_attention_backward",
    "_scaled_dot_product_fused_attention_overrideable",
    "_scaled_dot_product_fused_attention_overrideable_backward",
    "_flash_attention_forward",
    "_flash_attention_backward",
    "_efficient_attention_forward",
    "_efficient_attention_backward",
    "_cudnn_attention_forward",
    "_cudnn_attention_backward",
};

// Autograd nodes (their names carry a version suffix: MmBackward0).
constexpr std::string_view kBackwardNodes[] = {
    "MmBackward",
    "AddmmBackward",
    "BmmBackward",
    "BaddbmmBackward",
    "ConvolutionBackward",
    "CudnnConvolutionBackward",
    "LinearBackward",
    "ConvolutionTransposeBackward",
    "ScaledDotProductFlashAttentionBackward",
    "ScaledDotProductEfficientAttentionBackward",
    "ScaledDotProductCudnnAttentionBackward",
    "ScaledDotProductFusedAttentionOverrideableBackward",
    "ScaledGroupedMmBackward",
    "GroupedMmBackward",
};

std::string_view strip_aten(std::string_view name) noexcept {
  constexpr std::string_view kPrefix = "aten::";
  return name.substr(0, kPrefix.size()) == kPrefix ? name.substr(kPrefix.size()) : name;
}

using Shapes = std::vector<std::vector<std::int64_t>>;
using Dims = std::vector<std::pair<const char*, std::int64_t>>;

const std::vector<std::int64_t>* input(const Shapes& s, std::size_t i) {
  return i < s.size() && !s[i].empty() ? &s[i] : nullptr;
}

// M, K from a [..., M, K] operand and N from a [..., K, N] one.
Dims gemm_dims(const Shapes& s, std::size_t a_at, std::size_t b_at) {
  const auto* a = input(s, a_at);
  const auto* b = input(s, b_at);
  if (!a || !b || a->size() < 2 || b->size() < 2) return {};
  return {{"M", (*a)[a->size() - 2]}, {"K", a->back()}, {"N", b->back()}};
}

Dims linear_dims(const Shapes& s) {
  const auto* x = input(s, 0);
  const auto* w = input(s, 1);
  if (!x || !w || w->size() != 2) return {};
  std::int64_t m = 1;
  for (std::size_t i = 0; i + 1 < x->size(); ++i) m *= (*x)[i];
  return {{"M", m}, {"K", x->back()}, {"N", (*w)[0]}};
}

Dims conv_dims(const Shapes& s, std::size_t x_at, std::size_t w_at) {
  const auto* x = input(s, x_at);
  const auto* w = input(s, w_at);
  if (!x || !w || x->size() < 3 || w->size() < 3) return {};
  return {{"C_in", (*x)[1]}, {"C_out", (*w)[0]}};
}

Dims dims_of(std::string_view op, const Shapes& s) {
  if (op == "mm" || op == "bmm" || op == "_scaled_mm" || op == "matmul") return gemm_dims(s, 0, 1);
  if (op == "addmm" || op == "baddbmm" || op == "addbmm") return gemm_dims(s, 1, 2);
  if (op == "linear") return linear_dims(s);
  if (op == "convolution_backward") return conv_dims(s, 1, 2);
  if (op == "conv1d" || op == "conv2d" || op == "conv3d" || op == "convolution" ||
      op == "_convolution" || op == "cudnn_convolution")
    return conv_dims(s, 0, 1);
  return {};
}

bool has(std::string_view s, std::string_view part) noexcept {
  return s.find(part) != std::string_view::npos;
}

}  // namespace

bool tensor_core_eligible_op(std::string_view op_name) noexcept {
  const std::string_view op = strip_aten(op_name);
  for (std::string_view n : kAtenOps)
    if (op == n) return true;
  for (std::string_view n : kBackwardNodes)
    if (op.substr(0, n.size()) == n) return true;
  return false;
}

std::string dims_not_multiple_of_8(std::string_view op_name, const Shapes& input_shapes) {
  std::string out;
  for (const auto& [label, value] : dims_of(strip_aten(op_name), input_shapes)) {
    if (value % 8 == 0) continue;
    if (!out.empty()) out += ' ';
    out += label;
    out += '=';
    out += std::to_string(value);
  }
  return out;
}

void append_op_shapes_text(std::string& out, const Shapes& shapes) {
  const std::size_t from = out.size();
  for (const auto& s : shapes) {
    if (s.empty()) continue;
    if (out.size() > from) out += ' ';
    out += '[';
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (i) out += ',';
      char digits[24];
      const auto end = std::to_chars(digits, digits + sizeof digits, s[i]).ptr;
      out.append(digits, end);
    }
    out += ']';
  }
}

void append_op_dtypes_text(std::string& out, const Shapes& shapes,
                           const std::vector<std::string>& dtypes) {
  const std::size_t from = out.size();
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    if (dtypes[i].empty() || (i < shapes.size() && shapes[i].empty()) ||
        (i >= shapes.size() && !shapes.empty()))
      continue;
    if (out.size() > from) out += ' ';
    out += dtypes[i];
  }
}

std::string op_shapes_text(const Shapes& shapes) {
  std::string out;
  append_op_shapes_text(out, shapes);
  return out;
}

std::string op_dtypes_text(const Shapes& shapes, const std::vector<std::string>& dtypes) {
  std::string out;
  append_op_dtypes_text(out, shapes, dtypes);
  return out;
}

bool tensor_core_input_types(const std::vector<std::string>& dtypes) noexcept {
  // c10's TypeMeta names ("c10::Half", "c10::Float8_e4m3fn", "signed char") and ScalarType names
  // ("Half", "BFloat16", "Float8_e5m2", "Char"), as Kineto and the op hooks write them.
  for (const std::string& d : dtypes) {
    const std::string_view t = std::string_view(d).substr(0, 5) == "c10::"
                                   ? std::string_view(d).substr(5)
                                   : std::string_view(d);
    if (t == "Half" || t == "BFloat16" || t == "signed char" || t == "Char" ||
        t.substr(0, 6) == "Float8" || t.substr(0, 6) == "Float4" || has(t, "qint8"))
      return true;
  }
  return false;
}

bool tensor_core_by_op(const KernelClass& kernel, ComputeCapability device,
                       bool op_has_tensor_core_inputs) noexcept {
  if (kernel.decision != Decision::Unknown || kernel.communication) return false;
  if (kernel.precision == Precision::FP32 || kernel.precision == Precision::FP64) return false;
  return op_has_tensor_core_inputs && device.known() && device.sm() >= 80;
}

}  // namespace fathom
