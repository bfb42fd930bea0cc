#include <ATen/autocast_mode.h>
#include <fathom/checkpoint.h>
#include <fathom/error.h>
#include <fathom/sequential.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "gradient_compare.h"

namespace fathom {
namespace {

using test::expect_bitwise_equal;
using test::grads_of;
using test::zero_grads;

torch::nn::Sequential mlp_with_dropout() {
  torch::manual_seed(1);
  using namespace torch::nn;
  return Sequential(Linear(16, 32), ReLU(), Dropout(0.3), Linear(32, 32), Tanh(), Dropout(0.2),
                    Linear(32, 32), ReLU(), Linear(32, 4));
}

TEST(Checkpoint, GradientsEqualThePlainRunBitForBitWithDropout) {
  auto model = mlp_with_dropout();
  model->train();
  const at::Tensor x = torch::randn({8, 16});  // data: does not require grad

  torch::manual_seed(7);
  const at::Tensor plain_out = fathom::forward(model, x);
  plain_out.pow(2).sum().backward();
  const auto plain = grads_of(*model);
  const at::Tensor plain_next = torch::rand({4});  // where the random stream stands after the step

  zero_grads(*model);
  torch::manual_seed(7);
  // The first segment starts at the input (no grad): its parameters still get gradients.
  const at::Tensor out = fathom::forward(model, x, {{0, 3}, {3, 6}, {7, 9}});
  EXPECT_FALSE(out.grad_fn() == nullptr);
  EXPECT_TRUE(torch::equal(out, plain_out));
  out.pow(2).sum().backward();
  expect_bitwise_equal(plain, grads_of(*model));
  // The recompute replayed the masks and put the generator back where the forward left it.
  EXPECT_TRUE(torch::equal(torch::rand({4}), plain_next));
}

TEST(Checkpoint, WithoutRngPreservationDropoutDrawsAnotherMask) {
  auto model = mlp_with_dropout();
  model->train();
  const at::Tensor x = torch::randn({64, 16});
  torch::manual_seed(7);
  fathom::forward(model, x).pow(2).sum().backward();
  const auto plain = grads_of(*model);
  zero_grads(*model);
  torch::manual_seed(7);
  auto seq = model;
  const at::Tensor out = checkpoint([&seq](const at::Tensor& t) { return seq->forward(t); }, x,
                                    CheckpointOptions().module(model).preserve_rng_state(false));
  out.pow(2).sum().backward();
  const auto other = grads_of(*model);
  bool any_differs = false;
  for (std::size_t i = 0; i < plain.size(); ++i)
    any_differs = any_differs || !torch::equal(plain[i], other[i]);
  EXPECT_TRUE(any_differs) << "the test cannot tell replayed masks from fresh ones";
}

TEST(Checkpoint, ModuleForm) {
  torch::manual_seed(2);
  torch::nn::Linear linear(6, 3);
  const at::Tensor x = torch::randn({5, 6});
  linear->forward(x).sum().backward();
  const auto plain = grads_of(*linear);
  zero_grads(*linear);
  at::Tensor y = checkpoint(linear, x);
  y.sum().backward();
  expect_bitwise_equal(plain, grads_of(*linear));
}

TEST(Checkpoint, SeveralTensorsInAndOutWithNonTensorArguments) {
  torch::manual_seed(3);
  const at::Tensor a0 = torch::randn({4, 5}), b0 = torch::randn({4, 5});
  const double scale = 1.5;  // non-tensor arguments travel in the captures
  const int offset = 2;
  auto fn = [scale, offset](const std::vector<at::Tensor>& in) {
    return std::vector<at::Tensor>{in[0] * in[1] * scale, torch::sin(in[0]) + offset, in[1].exp()};
  };
  auto run = [&](bool checkpointed) {
    at::Tensor a = a0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    auto outs = checkpointed ? checkpoint(fn, {a, b}) : fn({a, b});
    (outs[0].sum() + outs[1].pow(2).sum() + outs[2].mean()).backward();
    return std::vector<at::Tensor>{a.grad(), b.grad(), outs[0].detach(), outs[1].detach(),
                                   outs[2].detach()};
  };
  expect_bitwise_equal(run(false), run(true));
}

TEST(Checkpoint, UnusedOutputGetsNoGradientButTheOthersDo) {
  const at::Tensor a = torch::randn({3}).requires_grad_();
  auto outs = checkpoint(
      [](const std::vector<at::Tensor>& in) {
        return std::vector<at::Tensor>{in[0] * 2, in[0] * 3};
      },
      {a});
  outs[0].sum().backward();
  EXPECT_TRUE(torch::equal(a.grad(), torch::full({3}, 2.0)));
}

TEST(Checkpoint, GradWithInputsIsRefusedWithTheReason) {
  torch::manual_seed(4);
  torch::nn::Linear linear(4, 4);
  const at::Tensor x = torch::randn({2, 4});
  const at::Tensor y = checkpoint(linear, x);
  try {
    (void)torch::autograd::grad({y.sum()}, {linear->weight});
    FAIL() << "grad() through a reentrant checkpoint must be refused";
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("torch::autograd::grad()"), std::string::npos) << msg;
    EXPECT_NE(msg.find("loss.backward()"), std::string::npos) << msg;
  }
}

TEST(Checkpoint, BatchNormStatisticsAreUpdatedOnce) {
  torch::manual_seed(5);
  using namespace torch::nn;
  Sequential model(Linear(8, 16), BatchNorm1d(16), ReLU(), Linear(16, 2));
  model->train();
  const at::Tensor x = torch::randn({32, 8});
  auto snapshot = [&] {
    std::vector<at::Tensor> out;
    for (const auto& b : model->buffers()) out.push_back(b.clone());
    return out;
  };
  const auto before = snapshot();
  fathom::forward(model, x).sum().backward();
  const auto plain_grads = grads_of(*model);
  const auto plain_stats = snapshot();
  // Back to the statistics before the plain step, then the same step checkpointed.
  {
    torch::NoGradGuard no_grad;
    auto buffers = model->buffers();
    for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(before[i]);
  }
  zero_grads(*model);
  fathom::forward(model, x, {{0, 3}}).sum().backward();
  expect_bitwise_equal(plain_grads, grads_of(*model));
  const auto stats = snapshot();
  ASSERT_EQ(stats.size(), plain_stats.size());
  for (std::size_t i = 0; i < stats.size(); ++i)
    EXPECT_TRUE(torch::equal(stats[i], plain_stats[i])) << "buffer " << i;
}

TEST(Checkpoint, BatchNormOfAnUnnamedModuleIsRefused) {
  torch::nn::BatchNorm1d bn(4);
  bn->train();
  const at::Tensor x = torch::randn({8, 4}).requires_grad_();
  try {
    (void)checkpoint([bn](const at::Tensor& t) mutable { return bn->forward(t); }, x);
    FAIL() << "a BatchNorm the checkpoint does not know about must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("running statistics"), std::string::npos) << e.what();
  }
  // Named, it is handled; in eval mode there are no statistics to protect.
  EXPECT_NO_THROW((void)checkpoint([bn](const at::Tensor& t) mutable { return bn->forward(t); }, x,
                                   CheckpointOptions().module(bn)));
  bn->eval();
  EXPECT_NO_THROW(
      (void)checkpoint([bn](const at::Tensor& t) mutable { return bn->forward(t); }, x));
}

// Enters CPU autocast in bf16 for one scope, as an autocast region of a training loop would.
class CpuAutocast {
 public:
  CpuAutocast() {
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~CpuAutocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(at::kCPU, false);
  }
};

TEST(Checkpoint, RecomputeRunsUnderTheForwardsAutocastState) {
  torch::manual_seed(6);
  using namespace torch::nn;
  Sequential model(Linear(32, 64), ReLU(), Linear(64, 64), ReLU(), Linear(64, 8));
  const at::Tensor x = torch::randn({16, 32});
  at::Tensor out;
  {
    CpuAutocast autocast;
    out = fathom::forward(model, x);
  }
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  out.to(at::kFloat).pow(2).sum().backward();  // backward outside autocast, as in a training loop
  const auto plain = grads_of(*model);
  zero_grads(*model);
  {
    CpuAutocast autocast;
    out = fathom::forward(model, x, {{0, 4}});
  }
  out.to(at::kFloat).pow(2).sum().backward();
  expect_bitwise_equal(plain, grads_of(*model));
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
}

TEST(Checkpoint, UndefinedInputOrMalformedPlanIsAClearError) {
  EXPECT_THROW(
      (void)checkpoint([](const std::vector<at::Tensor>& in) { return in; }, {at::Tensor()}),
      Error);
  auto model = mlp_with_dropout();
  const at::Tensor x = torch::randn({2, 16});
  EXPECT_THROW((void)fathom::forward(model, x, {{3, 2}}), Error);
  EXPECT_THROW((void)fathom::forward(model, x, {{0, 4}, {3, 5}}), Error);
  EXPECT_THROW((void)fathom::forward(model, x, {{8, 10}}), Error);
}

TEST(Checkpoint, UnderNoGradItIsAPlainCall) {
  auto model = mlp_with_dropout();
  model->eval();
  const at::Tensor x = torch::randn({2, 16});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(fathom::forward(model, x, {{0, 9}}), model->forward(x)));
}

}  // namespace
}  // namespace fathom
