#pragma once
// The floating-point operations of one op call, from its input shapes: torch.utils.flop_counter's
// registry (torch 2.11) mirrored formula by formula, so that fathom's counts equal
// FlopCounterMode's on the same ops. Products count 2 per multiply-add, as torch counts them; bias
// additions, softmax and the causal mask are not counted (torch does not count them either).
//
// Torch-free: the LibTorch layer describes an op's arguments as OpArg values (a tensor's shape, an
// int list, a bool) and its outputs as shapes; an op torch would reject (shapes that do not fit)
// has no count.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace fathom::detail {

using Shape = std::vector<std::int64_t>;

// One argument of an op call, as the schema passes it.
struct OpArg {
  enum class Kind { None, Tensor, Ints, Int, Bool, Other };
  Kind kind = Kind::Other;
  // Tensor: its sizes. Ints: the list. Int, Bool: one value. An integer offsets tensor of a jagged
  // (nested) attention call: its contents (see flop_inputs_read_contents).
  std::vector<std::int64_t> values;

  static OpArg none() { return {Kind::None, {}}; }
  static OpArg tensor(Shape sizes) { return {Kind::Tensor, std::move(sizes)}; }
  static OpArg ints(std::vector<std::int64_t> v) { return {Kind::Ints, std::move(v)}; }
  static OpArg integer(std::int64_t v) { return {Kind::Int, {v}}; }
  static OpArg boolean(bool v) { return {Kind::Bool, {v ? 1 : 0}}; }
};

// The formula an op's FLOPs come from, by op name ("aten::mm"); None for every other op.
enum class FlopFormula {
  None,
  Mm,                          // mm
  Addmm,                       // addmm
  Bmm,                         // bmm
  Baddbmm,                     // baddbmm
  ScaledMm,                    // _scaled_mm (the fp8 product)
  Convolution,                 // convolution, _convolution, cudnn_convolution, ...
  ConvolutionBackward,         // convolution_backward, by its output mask
  Attention,                   // _scaled_dot_product_{flash,efficient,cudnn}_attention
  AttentionBackward,           // ... and their _backward
  FlashAttention,              // _flash_attention_forward (jagged batches unpacked)
  EfficientAttention,          // _efficient_attention_forward
  FlashAttentionBackward,      // _flash_attention_backward
  EfficientAttentionBackward,  // _efficient_attention_backward
};

FlopFormula flop_formula_of(std::string_view op) noexcept;

// False for the ops fathom counts that FlopCounterMode does not: the CPU kernel of
// scaled_dot_product_attention (_scaled_dot_product_flash_attention_for_cpu and its backward),
// which fathom counts with the attention formula. A comparison with FlopCounterMode leaves them
// out.
bool counted_by_flop_counter_mode(std::string_view op) noexcept;

// Ops whose kernels compute matrix products that no formula counts, fathom's or torch's: the
// fused recurrent layers (oneDNN's LSTM and GRU on a CPU, cuDNN's on a GPU) and the fused
// transformer fast paths. Their calls are counted and named in the report (issue 24: an LSTM's
// products were left out silently).
bool computes_uncounted_products(std::string_view op) noexcept;

// For the jagged-batch attention formulas, the argument positions whose tensors' contents (the
// cumulative sequence offsets) the formula reads; empty for every other formula.
std::span<const int> flop_inputs_read_contents(FlopFormula f) noexcept;

// The op's FLOPs, or nullopt where its arguments do not fit the formula. outputs: the shapes of
// the op's outputs (an undefined output: empty); the convolutions read them, as torch does.
std::optional<std::int64_t> op_flops(FlopFormula f, std::span<const OpArg> inputs,
                                     std::span<const Shape> outputs);

// torch.utils.flop_counter's building blocks, for tests and for the formulas above.
std::optional<std::int64_t> mm_flops(const Shape& a, const Shape& b) noexcept;
std::optional<std::int64_t> bmm_flops(const Shape& a, const Shape& b) noexcept;
std::int64_t conv_flops(const Shape& x, const Shape& w, const Shape& out, bool transposed) noexcept;
std::optional<std::int64_t> attention_flops(const Shape& q, const Shape& k,
                                            const Shape& v) noexcept;
std::optional<std::int64_t> attention_backward_flops(const Shape& grad_out, const Shape& q,
                                                     const Shape& k, const Shape& v) noexcept;

}  // namespace fathom::detail
