#include "analyze/flop_formulas.h"

#include <array>
#include <utility>

namespace fathom::detail {
namespace {

struct Registered {
  std::string_view op;
  FlopFormula formula;
};

// torch/utils/flop_counter.py's flop_registry, in its order, then the ops fathom adds.
constexpr std::array<Registered, 23> kRegistry{{
    {"aten::mm", FlopFormula::Mm},
    {"aten::addmm", FlopFormula::Addmm},
    {"aten::bmm", FlopFormula::Bmm},
    {"aten::baddbmm", FlopFormula::Baddbmm},
    {"aten::_scaled_mm", FlopFormula::ScaledMm},
    {"aten::convolution", FlopFormula::Convolution},
    {"aten::_convolution", FlopFormula::Convolution},
    {"aten::cudnn_convolution", FlopFormula::Convolution},
    {"aten::convolution_overrideable", FlopFormula::Convolution},
    {"aten::_slow_conv2d_forward", FlopFormula::Convolution},
    {"aten::convolution_backward", FlopFormula::ConvolutionBackward},
    {"aten::_scaled_dot_product_efficient_attention", FlopFormula::Attention},
    {"aten::_scaled_dot_product_flash_attention", FlopFormula::Attention},
    {"aten::_scaled_dot_product_cudnn_attention", FlopFormula::Attention},
    {"aten::_scaled_dot_product_efficient_attention_backward", FlopFormula::AttentionBackward},
    {"aten::_scaled_dot_product_flash_attention_backward", FlopFormula::AttentionBackward},
    {"aten::_scaled_dot_product_cudnn_attention_backward", FlopFormula::AttentionBackward},
    {"aten::_flash_attention_forward", FlopFormula::FlashAttention},
    {"aten::_efficient_attention_forward", FlopFormula::EfficientAttention},
    {"aten::_flash_attention_backward", FlopFormula::FlashAttentionBackward},
    {"aten::_efficient_attention_backward", FlopFormula::EfficientAttentionBackward},
    // Not in torch's registry: scaled_dot_product_attention's CPU kernel, the same product as
    // the GPU variants (its arguments start with query, key, value; the backward's with grad_out).
    {"aten::_scaled_dot_product_flash_attention_for_cpu", FlopFormula::Attention},
    {"aten::_scaled_dot_product_flash_attention_for_cpu_backward", FlopFormula::AttentionBackward},
}};
constexpr std::size_t kTorchRegistered = 21;

// Argument positions of the cumulative sequence offsets (cum_seq_q, cum_seq_k).
constexpr std::array<int, 2> kFlashForwardOffsets{3, 4};
constexpr std::array<int, 2> kEfficientForwardOffsets{4, 5};
constexpr std::array<int, 2> kBackwardOffsets{6, 7};

const OpArg* arg(std::span<const OpArg> a, std::size_t i) { return i < a.size() ? &a[i] : nullptr; }

const Shape* tensor_arg(std::span<const OpArg> a, std::size_t i) {
  const OpArg* x = arg(a, i);
  return x && x->kind == OpArg::Kind::Tensor ? &x->values : nullptr;
}

std::int64_t product(const Shape& s, std::size_t from) {
  std::int64_t p = 1;
  for (std::size_t i = from; i < s.size(); ++i) p *= s[i];
  return p;
}

// Dims 0 and 1 swapped: conv backward's weight gradient is a convolution over the batch.
Shape swap01(const Shape& s) {
  Shape t = s;
  if (t.size() >= 2) std::swap(t[0], t[1]);
  return t;
}

bool is_true(const OpArg* a) {
  return a && (a->kind == OpArg::Kind::Bool || a->kind == OpArg::Kind::Int) && !a->values.empty() &&
         a->values[0] != 0;
}

// Per-element lengths of a jagged batch from its offsets, as torch reads them (offsets.diff()).
std::vector<std::int64_t> lengths(const std::vector<std::int64_t>& offsets) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 1; i < offsets.size(); ++i) out.push_back(offsets[i] - offsets[i - 1]);
  return out;
}

// The attention formulas that unpack jagged batches: q, k, v (and grad_out for backward) at the
// given positions; offsets_at: cum_seq_q's position (cum_seq_k follows). efficient: the
// efficient kernels' jagged inputs are 4-D (1, total, heads, dim), the flash kernels' 3-D.
std::optional<std::int64_t> jagged_attention(std::span<const OpArg> in, bool backward,
                                             std::size_t offsets_at, bool efficient) {
  const std::size_t q_at = backward ? 1 : 0;
  const Shape* q = tensor_arg(in, q_at);
  const Shape* k = tensor_arg(in, q_at + 1);
  const Shape* v = tensor_arg(in, q_at + 2);
  const Shape* g = backward ? tensor_arg(in, 0) : nullptr;
  if (!q || !k || !v || (backward && !g)) return std::nullopt;
  const OpArg* cq = arg(in, offsets_at);
  const OpArg* ck = arg(in, offsets_at + 1);
  if (!cq || cq->kind == OpArg::Kind::None) {
    return backward ? attention_backward_flops(*g, *q, *k, *v) : attention_flops(*q, *k, *v);
  }
  const std::size_t dims = efficient ? 4 : 3;
  if (!ck || cq->kind != OpArg::Kind::Ints || ck->kind != OpArg::Kind::Ints) return std::nullopt;
  if (q->size() != dims || k->size() != dims || v->size() != dims) return std::nullopt;
  if (backward && *g != *q) return std::nullopt;
  if (cq->values.size() != ck->values.size()) return std::nullopt;
  auto heads_dim = [&](const Shape& s) { return std::pair{s[dims - 2], s[dims - 1]}; };
  const auto [hq, dq] = heads_dim(*q);
  const auto [hk, dk] = heads_dim(*k);
  const auto [hv, dv] = heads_dim(*v);
  const std::vector<std::int64_t> lq = lengths(cq->values), lk = lengths(ck->values);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < lq.size(); ++i) {
    const Shape qs{1, hq, lq[i], dq}, ks{1, hk, lk[i], dk}, vs{1, hv, lk[i], dv};
    const auto f =
        backward ? attention_backward_flops(qs, qs, ks, vs) : attention_flops(qs, ks, vs);
    if (!f) return std::nullopt;
    total += *f;
  }
  return total;
}

}  // namespace

FlopFormula flop_formula_of(std::string_view op) noexcept {
  for (const Registered& r : kRegistry)
    if (r.op == op) return r.formula;
  return FlopFormula::None;
}

bool counted_by_flop_counter_mode(std::string_view op) noexcept {
  for (std::size_t i = 0; i < kTorchRegistered; ++i)
    if (kRegistry[i].op == op) return true;
  return false;
}

bool computes_uncounted_products(std::string_view op) noexcept {
  static constexpr std::array<std::string_view, 14> kUncounted{
      "aten::mkldnn_rnn_layer",
      "aten::mkldnn_rnn_layer_backward",
      "aten::_cudnn_rnn",
      "aten::_cudnn_rnn_backward",
      "aten::miopen_rnn",
      "aten::miopen_rnn_backward",
      "aten::_thnn_fused_lstm_cell",
      "aten::_thnn_fused_lstm_cell_backward_impl",
      "aten::_thnn_fused_gru_cell",
      "aten::_thnn_fused_gru_cell_backward",
      "aten::_native_multi_head_attention",
      "aten::_transformer_encoder_layer_fwd",
      "aten::quantized_lstm_cell",
      "aten::quantized_gru_cell"};
  for (std::string_view u : kUncounted)
    if (u == op) return true;
  return false;
}

std::span<const int> flop_inputs_read_contents(FlopFormula f) noexcept {
  switch (f) {
    case FlopFormula::FlashAttention:
      return kFlashForwardOffsets;
    case FlopFormula::EfficientAttention:
      return kEfficientForwardOffsets;
    case FlopFormula::FlashAttentionBackward:
    case FlopFormula::EfficientAttentionBackward:
      return kBackwardOffsets;
    default:
      return {};
  }
}

std::optional<std::int64_t> mm_flops(const Shape& a, const Shape& b) noexcept {
  if (a.size() != 2 || b.size() != 2 || a[1] != b[0]) return std::nullopt;
  return a[0] * b[1] * 2 * a[1];
}

std::optional<std::int64_t> bmm_flops(const Shape& a, const Shape& b) noexcept {
  if (a.size() != 3 || b.size() != 3 || a[0] != b[0] || a[2] != b[1]) return std::nullopt;
  return a[0] * a[1] * b[2] * 2 * a[2];
}

std::int64_t conv_flops(const Shape& x, const Shape& w, const Shape& out,
                        bool transposed) noexcept {
  // Only the multiplications of the product, the bias left out, exactly as torch counts (its
  // comment: padding is not accounted for either).
  const Shape& spatial = transposed ? x : out;
  if (x.empty() || w.size() < 2) return 0;
  return product(spatial, 2) * product(w, 2) * x[0] * w[0] * w[1] * 2;
}

std::optional<std::int64_t> attention_flops(const Shape& q, const Shape& k,
                                            const Shape& v) noexcept {
  if (q.size() != 4 || k.size() != 4 || v.size() != 4) return std::nullopt;
  const std::int64_t b = q[0], h = q[1], sq = q[2], dq = q[3], sk = k[2], dv = v[3];
  if (b != k[0] || b != v[0] || h != k[1] || h != v[1] || dq != k[3] || sk != v[2])
    return std::nullopt;
  // scores = q @ k^T, then out = scores @ v
  return *bmm_flops({b * h, sq, dq}, {b * h, dq, sk}) +
         *bmm_flops({b * h, sq, sk}, {b * h, sk, dv});
}

std::optional<std::int64_t> attention_backward_flops(const Shape& g, const Shape& q, const Shape& k,
                                                     const Shape& v) noexcept {
  if (g.size() != 4 || q.size() != 4 || k.size() != 4 || v.size() != 4) return std::nullopt;
  const std::int64_t b = q[0], h = q[1], sq = q[2], dq = q[3], sk = k[2], dv = v[3];
  if (b != k[0] || b != v[0] || b != g[0] || h != k[1] || h != v[1] || h != g[1] || dq != k[3])
    return std::nullopt;
  if (dv != g[3] || sk != v[2] || sq != g[2]) return std::nullopt;
  const std::int64_t bh = b * h;
  std::int64_t total = 0;
  total += *bmm_flops({bh, sq, dq}, {bh, dq, sk});  // the scores, recomputed
  total += *bmm_flops({bh, sq, dv}, {bh, dv, sk});  // grad of the scores, through v
  total += *bmm_flops({bh, sk, sq}, {bh, sq, dv});  // grad of v
  total += *bmm_flops({bh, sq, sk}, {bh, sk, dq});  // grad of q
  total += *bmm_flops({bh, dq, sq}, {bh, sq, sk});  // grad of k
  return total;
}

std::optional<std::int64_t> op_flops(FlopFormula f, std::span<const OpArg> in,
                                     std::span<const Shape> outputs) {
  auto t = [&](std::size_t i) { return tensor_arg(in, i); };
  switch (f) {
    case FlopFormula::None:
      return std::nullopt;
    case FlopFormula::Mm:
    case FlopFormula::ScaledMm:
      if (!t(0) || !t(1)) return std::nullopt;
      return mm_flops(*t(0), *t(1));
    case FlopFormula::Addmm:
      if (!t(1) || !t(2)) return std::nullopt;
      return mm_flops(*t(1), *t(2));
    case FlopFormula::Bmm:
      if (!t(0) || !t(1)) return std::nullopt;
      return bmm_flops(*t(0), *t(1));
    case FlopFormula::Baddbmm:
      if (!t(1) || !t(2)) return std::nullopt;
      return bmm_flops(*t(1), *t(2));
    case FlopFormula::Convolution: {
      // torch reads `transposed` as the seventh argument of every variant it registers here.
      if (!t(0) || !t(1) || outputs.empty()) return std::nullopt;
      return conv_flops(*t(0), *t(1), outputs[0], is_true(arg(in, 6)));
    }
    case FlopFormula::ConvolutionBackward: {
      const Shape *g = t(0), *x = t(1), *w = t(2);
      const OpArg* mask = arg(in, 10);
      if (!g || !x || !w || !mask || mask->kind != OpArg::Kind::Ints || mask->values.size() < 2)
        return std::nullopt;
      const bool transposed = is_true(arg(in, 7));
      std::int64_t total = 0;
      if (mask->values[0]) {
        if (outputs.empty()) return std::nullopt;
        total += conv_flops(*g, *w, outputs[0], !transposed);  // grad_input: a transposed conv
      }
      if (mask->values[1]) {
        if (outputs.size() < 2) return std::nullopt;
        const Shape gw = swap01(outputs[1]);
        total += transposed ? conv_flops(swap01(*g), swap01(*x), gw, false)
                            : conv_flops(swap01(*x), swap01(*g), gw, false);
      }
      return total;
    }
    case FlopFormula::Attention:
      if (!t(0) || !t(1) || !t(2)) return std::nullopt;
      return attention_flops(*t(0), *t(1), *t(2));
    case FlopFormula::AttentionBackward:
      if (!t(0) || !t(1) || !t(2) || !t(3)) return std::nullopt;
      return attention_backward_flops(*t(0), *t(1), *t(2), *t(3));
    case FlopFormula::FlashAttention:
      return jagged_attention(in, false, 3, false);
    case FlopFormula::EfficientAttention:
      return jagged_attention(in, false, 4, true);
    case FlopFormula::FlashAttentionBackward:
      return jagged_attention(in, true, 6, false);
    case FlopFormula::EfficientAttentionBackward:
      return jagged_attention(in, true, 6, true);
  }
  return std::nullopt;
}

}  // namespace fathom::detail
