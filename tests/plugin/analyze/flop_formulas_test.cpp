// The FLOP formulas against torch.utils.flop_counter (torch 2.11): every expected number below is
// what torch's own function returns for the same shapes (mm_flop, conv_flop_count,
// conv_backward_flop, sdpa_flop_count, sdpa_backward_flop_count, and the jagged attention
// formulas with offsets [0, 3, 7] and [0, 4, 9]).
#include "analyze/flop_formulas.h"

#include <gtest/gtest.h>

#include <vector>

namespace fathom::detail {
namespace {

using Kind = OpArg::Kind;

std::optional<std::int64_t> flops(std::string_view op, std::vector<OpArg> in,
                                  std::vector<Shape> out = {}) {
  return op_flops(flop_formula_of(op), in, out);
}

TEST(FlopFormulas, RegistryMirrorsTorchAndAddsTheCpuAttentionKernel) {
  for (const char* op : {"aten::mm",
                         "aten::addmm",
                         "aten::bmm",
                         "aten::baddbmm",
                         "aten::_scaled_mm",
                         "aten::convolution",
                         "aten::_convolution",
                         "aten::cudnn_convolution",
                         "aten::convolution_overrideable",
                         "aten::_slow_conv2d_forward",
                         "aten::convolution_backward",
                         "aten::_scaled_dot_product_efficient_attention",
                         "aten::_scaled_dot_product_flash_attention",
                         "aten::_scaled_dot_product_cudnn_attention",
                         "aten::_scaled_dot_product_efficient_attention_backward",
                         "aten::_scaled_dot_product_flash_attention_backward",
                         "aten::_scaled_dot_product_cudnn_attention_backward",
                         "aten::_flash_attention_forward",
                         "aten::_efficient_attention_forward",
                         "aten::_flash_attention_backward",
                         "aten::_efficient_attention_backward"}) {
    EXPECT_NE(flop_formula_of(op), FlopFormula::None) << op;
    EXPECT_TRUE(counted_by_flop_counter_mode(op)) << op;
  }
  // Composites are not counted: their leaves are (linear -> addmm, matmul -> mm/bmm).
  for (const char* op : {"aten::linear", "aten::matmul", "aten::conv2d", "aten::addmm_",
                         "aten::scaled_dot_product_attention", "aten::einsum", "aten::add"})
    EXPECT_EQ(flop_formula_of(op), FlopFormula::None) << op;
  EXPECT_EQ(flop_formula_of("aten::_scaled_dot_product_flash_attention_for_cpu"),
            FlopFormula::Attention);
  EXPECT_EQ(flop_formula_of("aten::_scaled_dot_product_flash_attention_for_cpu_backward"),
            FlopFormula::AttentionBackward);
  EXPECT_FALSE(counted_by_flop_counter_mode("aten::_scaled_dot_product_flash_attention_for_cpu"));
}

TEST(FlopFormulas, MatrixProducts) {
  EXPECT_EQ(flops("aten::mm", {OpArg::tensor({4, 8}), OpArg::tensor({8, 16})}), 1024);
  // addmm and baddbmm: the bias (first argument) adds nothing.
  EXPECT_EQ(
      flops("aten::addmm", {OpArg::tensor({16}), OpArg::tensor({4, 8}), OpArg::tensor({8, 16})}),
      1024);
  EXPECT_EQ(flops("aten::bmm", {OpArg::tensor({3, 4, 8}), OpArg::tensor({3, 8, 16})}), 3072);
  EXPECT_EQ(flops("aten::baddbmm",
                  {OpArg::tensor({3, 4, 16}), OpArg::tensor({3, 4, 8}), OpArg::tensor({3, 8, 16})}),
            3072);
  EXPECT_EQ(flops("aten::_scaled_mm", {OpArg::tensor({4, 8}), OpArg::tensor({8, 16}),
                                       OpArg::tensor({}), OpArg::tensor({})}),
            1024);
  // Shapes torch would reject have no count.
  EXPECT_FALSE(flops("aten::mm", {OpArg::tensor({4, 8}), OpArg::tensor({9, 16})}));
  EXPECT_FALSE(flops("aten::bmm", {OpArg::tensor({3, 4, 8}), OpArg::tensor({2, 8, 16})}));
  EXPECT_FALSE(flops("aten::mm", {OpArg::tensor({4, 8})}));
}

std::vector<OpArg> conv_args(Shape x, Shape w, bool transposed) {
  return {OpArg::tensor(std::move(x)), OpArg::tensor(std::move(w)), OpArg::none(),
          OpArg::ints({2, 2}),         OpArg::ints({1, 1}),         OpArg::ints({1, 1}),
          OpArg::boolean(transposed),  OpArg::ints({0, 0}),         OpArg::integer(1)};
}

TEST(FlopFormulas, Convolutions) {
  // 16 output points per side: the output's spatial size counts, not the input's.
  EXPECT_EQ(flops("aten::convolution", conv_args({2, 3, 32, 32}, {16, 3, 3, 3}, false),
                  {{2, 16, 16, 16}}),
            442368);
  EXPECT_EQ(flops("aten::_convolution", conv_args({2, 3, 32, 32}, {16, 3, 3, 3}, false),
                  {{2, 16, 16, 16}}),
            442368);
  // Transposed: the input's spatial size.
  EXPECT_EQ(
      flops("aten::convolution", conv_args({2, 16, 8, 8}, {16, 8, 4, 4}, true), {{2, 8, 17, 17}}),
      524288);
  EXPECT_FALSE(flops("aten::convolution", conv_args({2, 3, 32, 32}, {16, 3, 3, 3}, false)));
}

std::vector<OpArg> conv_backward_args(Shape g, Shape x, Shape w, bool transposed,
                                      std::vector<std::int64_t> mask) {
  return {OpArg::tensor(std::move(g)), OpArg::tensor(std::move(x)),
          OpArg::tensor(std::move(w)), OpArg::none(),
          OpArg::ints({2, 2}),         OpArg::ints({1, 1}),
          OpArg::ints({1, 1}),         OpArg::boolean(transposed),
          OpArg::ints({0, 0}),         OpArg::integer(1),
          OpArg::ints(std::move(mask))};
}

TEST(FlopFormulas, ConvolutionBackwardFollowsItsOutputMask) {
  EXPECT_EQ(
      flops("aten::convolution_backward",
            conv_backward_args({2, 16, 16, 16}, {2, 3, 32, 32}, {16, 3, 3, 3}, false, {1, 1, 0}),
            {{2, 3, 32, 32}, {16, 3, 3, 3}, {}}),
      884736);
  // The first layer's input needs no gradient: the weight's alone.
  EXPECT_EQ(
      flops("aten::convolution_backward",
            conv_backward_args({2, 16, 16, 16}, {2, 3, 32, 32}, {16, 3, 3, 3}, false, {0, 1, 0}),
            {{}, {16, 3, 3, 3}, {}}),
      442368);
  EXPECT_EQ(flops("aten::convolution_backward",
                  conv_backward_args({2, 8, 17, 17}, {2, 16, 8, 8}, {16, 8, 4, 4}, true, {1, 1, 0}),
                  {{2, 16, 8, 8}, {16, 8, 4, 4}, {}}),
            1048576);
  EXPECT_EQ(
      flops("aten::convolution_backward",
            conv_backward_args({2, 16, 16, 16}, {2, 3, 32, 32}, {16, 3, 3, 3}, false, {0, 0, 1}),
            {{}, {}, {16}}),
      0);
}

TEST(FlopFormulas, Attention) {
  const Shape q{2, 4, 10, 8}, k{2, 4, 12, 8}, v{2, 4, 12, 6}, g{2, 4, 10, 6};
  for (const char* op : {"aten::_scaled_dot_product_flash_attention",
                         "aten::_scaled_dot_product_efficient_attention",
                         "aten::_scaled_dot_product_cudnn_attention",
                         "aten::_scaled_dot_product_flash_attention_for_cpu"})
    EXPECT_EQ(flops(op, {OpArg::tensor(q), OpArg::tensor(k), OpArg::tensor(v)}), 26880) << op;
  for (const char* op : {"aten::_scaled_dot_product_flash_attention_backward",
                         "aten::_scaled_dot_product_efficient_attention_backward",
                         "aten::_scaled_dot_product_cudnn_attention_backward",
                         "aten::_scaled_dot_product_flash_attention_for_cpu_backward"})
    EXPECT_EQ(flops(op, {OpArg::tensor(g), OpArg::tensor(q), OpArg::tensor(k), OpArg::tensor(v)}),
              69120)
        << op;
  EXPECT_FALSE(flops("aten::_scaled_dot_product_flash_attention",
                     {OpArg::tensor(q), OpArg::tensor({2, 4, 12, 7}), OpArg::tensor(v)}));
  // The kernel-level ops without jagged offsets take the shapes as they come.
  EXPECT_EQ(flops("aten::_flash_attention_forward",
                  {OpArg::tensor(q), OpArg::tensor(k), OpArg::tensor(v), OpArg::none(),
                   OpArg::none(), OpArg::integer(10), OpArg::integer(12)}),
            26880);
}

TEST(FlopFormulas, JaggedAttentionSumsItsBatchElements) {
  const OpArg cq = OpArg::ints({0, 3, 7}), ck = OpArg::ints({0, 4, 9});
  EXPECT_EQ(flops("aten::_flash_attention_forward",
                  {OpArg::tensor({7, 4, 8}), OpArg::tensor({9, 4, 8}), OpArg::tensor({9, 4, 8}), cq,
                   ck, OpArg::integer(4), OpArg::integer(5)}),
            4096);
  const Shape q{1, 7, 4, 8}, k{1, 9, 4, 8};
  EXPECT_EQ(flops("aten::_efficient_attention_forward",
                  {OpArg::tensor(q), OpArg::tensor(k), OpArg::tensor(k), OpArg::none(), cq, ck,
                   OpArg::integer(4), OpArg::integer(5)}),
            4096);
  EXPECT_EQ(flops("aten::_efficient_attention_backward",
                  {OpArg::tensor(q), OpArg::tensor(q), OpArg::tensor(k), OpArg::tensor(k),
                   OpArg::none(), OpArg::none(), cq, ck, OpArg::integer(4), OpArg::integer(5)}),
            10240);
  EXPECT_EQ(flop_inputs_read_contents(FlopFormula::FlashAttention).size(), 2u);
  EXPECT_TRUE(flop_inputs_read_contents(FlopFormula::Mm).empty());
}

}  // namespace
}  // namespace fathom::detail
