#include <ATen/autocast_mode.h>
#include <fathom/autocast.h>
#include <fathom/error.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>

namespace fathom {
namespace {

namespace F = torch::nn::functional;

// autocast's nesting counter is not readable; incrementing it tells its value.
int nesting_depth() {
  const int depth = at::autocast::increment_nesting() - 1;
  at::autocast::decrement_nesting();
  return depth;
}

TEST(Autocast, MatmulLinearAndConvRunInBf16OnCpu) {
  torch::manual_seed(0);
  torch::nn::Linear linear(8, 4);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 4, 3));
  const auto x = torch::randn({2, 8});
  {
    AutocastScope autocast(c10::DeviceType::CPU);
    EXPECT_EQ(autocast.dtype(), torch::kBFloat16);
    EXPECT_EQ(linear(x).scalar_type(), torch::kBFloat16);
    EXPECT_EQ(torch::matmul(x, x.t()).scalar_type(), torch::kBFloat16);
    EXPECT_EQ(torch::mm(x, x.t()).scalar_type(), torch::kBFloat16);
    EXPECT_EQ(conv(torch::randn({1, 3, 8, 8})).scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(linear(x).scalar_type(), torch::kFloat);
}

// Auto mode's fp32 steps after bf16 ones: bf16 state is cast up, fp32 work is unchanged.
TEST(Autocast, Fp32AutocastCastsBf16InputsUpAndLeavesFp32BitForBit) {
  torch::manual_seed(0);
  torch::nn::LSTM lstm(torch::nn::LSTMOptions(8, 16).batch_first(true));
  const auto x = torch::randn({4, 5, 8});
  const auto h = torch::randn({1, 4, 16}), c = torch::randn({1, 4, 16});
  const auto plain = std::get<0>(lstm->forward(x, std::make_tuple(h, c)));
  const AutocastState saved = detail::enter_fp32_autocast(c10::DeviceType::CPU);
  EXPECT_FALSE(autocast_enabled(c10::DeviceType::CPU));  // no 16-bit op runs under it
  const auto same = std::get<0>(lstm->forward(x, std::make_tuple(h, c)));
  // State a bf16 step left behind; without the cast oneDNN's fp32 LSTM rejects it.
  const auto up = lstm->forward(x, std::make_tuple(h.to(torch::kBFloat16), c.to(torch::kBFloat16)));
  detail::leave_autocast(c10::DeviceType::CPU, saved);
  EXPECT_TRUE(torch::equal(plain, same));
  EXPECT_EQ(std::get<0>(up).scalar_type(), torch::kFloat);
  EXPECT_EQ(std::get<0>(std::get<1>(up)).scalar_type(), torch::kFloat);
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(nesting_depth(), 0);
}

TEST(Autocast, LossesStayFp32AndSoftmaxIsNotLowered) {
  torch::nn::Linear linear(8, 4);
  const auto x = torch::randn({4, 8});
  const auto target = torch::tensor({0, 1, 2, 3}, torch::kLong);
  AutocastScope autocast(c10::DeviceType::CPU);
  const auto logits = linear(x);
  ASSERT_EQ(logits.scalar_type(), torch::kBFloat16);
  // CPU autocast's fp32 list: losses upcast their bf16 inputs.
  EXPECT_EQ(F::cross_entropy(logits, target).scalar_type(), torch::kFloat);
  EXPECT_EQ(F::mse_loss(logits, torch::zeros({4, 4})).scalar_type(), torch::kFloat);
  EXPECT_EQ(F::nll_loss(torch::log_softmax(logits.to(torch::kFloat), 1), target).scalar_type(),
            torch::kFloat);
  // softmax is on no lower-precision list: fp32 in, fp32 out. (CPU's fp32 list does not hold
  // softmax, so a bf16 input stays bf16 there; CUDA's does, see the Gpu test.)
  EXPECT_EQ(torch::softmax(x, 1).scalar_type(), torch::kFloat);
  EXPECT_EQ(torch::softmax(logits, 1).scalar_type(), torch::kBFloat16);
}

TEST(Autocast, SavesAndRestoresStateAndNests) {
  at::autocast::set_autocast_dtype(at::kCPU, at::kHalf);
  ASSERT_FALSE(autocast_enabled(c10::DeviceType::CPU));
  ASSERT_EQ(nesting_depth(), 0);
  torch::nn::Linear linear(8, 4);
  const auto x = torch::randn({2, 8});
  {
    AutocastScope outer(c10::DeviceType::CPU, torch::kBFloat16);
    EXPECT_TRUE(autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(nesting_depth(), 1);
    {
      AutocastScope fp32_region(c10::DeviceType::CPU, std::nullopt, /*enabled=*/false);
      EXPECT_FALSE(autocast_enabled(c10::DeviceType::CPU));
      EXPECT_EQ(linear(x).scalar_type(), torch::kFloat);
      EXPECT_EQ(nesting_depth(), 2);
    }
    EXPECT_TRUE(autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(linear(x).scalar_type(), torch::kBFloat16);
  }
  EXPECT_FALSE(autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(at::autocast::get_autocast_dtype(at::kCPU), at::kHalf);
  EXPECT_EQ(nesting_depth(), 0);
  at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
}

TEST(Autocast, AnExceptionInsideLeavesTheStateAsItWas) {
  try {
    AutocastScope autocast(c10::DeviceType::CPU);
    throw std::runtime_error("in forward");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(nesting_depth(), 0);
}

// The autograd node of the cached bf16 copy of w that an autocast product used.
const torch::autograd::Node* weight_cast_node(const at::Tensor& product) {
  for (const auto& edge : product.grad_fn()->next_edges())
    if (edge.function) return edge.function.get();
  return nullptr;
}

TEST(Autocast, CachedCastsLiveForTheOutermostScopeOnly) {
  auto w = torch::randn({4, 4}, torch::requires_grad());
  const auto x = torch::randn({2, 4});
  at::Tensor a, b, c, d;
  {
    AutocastScope outer(c10::DeviceType::CPU);
    a = torch::mm(x, w);
    {
      AutocastScope inner(c10::DeviceType::CPU);
      b = torch::mm(x, w);
    }
    c = torch::mm(x, w);  // the inner scope's end kept the outer one's cache
  }
  {
    AutocastScope next(c10::DeviceType::CPU);
    d = torch::mm(x, w);  // the outer scope's end cleared it: w is cast again
  }
  ASSERT_NE(weight_cast_node(a), nullptr);
  EXPECT_EQ(weight_cast_node(a), weight_cast_node(b));
  EXPECT_EQ(weight_cast_node(a), weight_cast_node(c));
  EXPECT_NE(weight_cast_node(a), weight_cast_node(d));
  EXPECT_TRUE(torch::allclose(a.to(torch::kFloat), torch::mm(x, w), 0.05, 0.05));
}

TEST(Autocast, DtypesAutocastCannotUseAreErrors) {
  EXPECT_THROW(AutocastScope(c10::DeviceType::CPU, torch::kFloat), Error);
  EXPECT_THROW(AutocastScope(c10::DeviceType::CPU, torch::kDouble), Error);
  EXPECT_THROW(AutocastScope(c10::DeviceType::MPS), Error);
  try {
    AutocastScope bad(c10::DeviceType::CPU, torch::kFloat);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 or fp16"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(autocast_enabled(c10::DeviceType::CPU));
}

TEST(Autocast, DefaultsAndNames) {
  EXPECT_EQ(default_autocast_dtype(c10::DeviceType::CPU), torch::kBFloat16);
  EXPECT_EQ(short_dtype_name(torch::kBFloat16), "bf16");
  EXPECT_EQ(short_dtype_name(torch::kHalf), "fp16");
  EXPECT_EQ(short_dtype_name(torch::kFloat), "fp32");
}

TEST(AutocastGpu, CudaListsCastGemmsDownAndSoftmaxUp) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::nn::Linear linear(8, 4);
  linear->to(torch::kCUDA);
  const auto x = torch::randn({4, 8}, torch::kCUDA);
  AutocastScope autocast(c10::DeviceType::CUDA);
  const auto expected = default_autocast_dtype(c10::DeviceType::CUDA);
  EXPECT_EQ(autocast.dtype(), expected);
  const auto logits = linear(x);
  EXPECT_EQ(logits.scalar_type(), expected);
  EXPECT_EQ(torch::softmax(logits, 1).scalar_type(), torch::kFloat);
  EXPECT_EQ(
      F::cross_entropy(logits, torch::tensor({0, 1, 2, 3}, torch::kLong).cuda()).scalar_type(),
      torch::kFloat);
}

}  // namespace
}  // namespace fathom
