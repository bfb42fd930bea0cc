// Selective checkpointing (checkpoint.h's keep()/keep_if(); op_interception.h,
// selective_policy.cpp): kept ops are not run again, gradients are the plain run's bit for bit,
// dropout replays, misuse is an error that names the op, and the FLOP counter counts only what was
// recomputed.
#include <ATen/core/dispatch/Dispatcher.h>
#include <fathom/checkpoint.h>
#include <fathom/error.h>
#include <fathom/sequential.h>
#include <gtest/gtest.h>
#include <torch/library.h>
#include <torch/torch.h>

#include <atomic>
#include <string>
#include <vector>

#include "gradient_compare.h"
#include "measure/op_flop_callback.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// An op whose CPU kernel counts its runs: a matrix product with an autograd formula, registered
// as aten's ops are (a backend kernel below an Autograd kernel).
std::atomic<int> g_counted_mm_runs{0};

at::Tensor counted_mm_cpu(const at::Tensor& a, const at::Tensor& b) {
  ++g_counted_mm_runs;
  return at::mm(a, b);
}

struct CountedMm : torch::autograd::Function<CountedMm> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    ctx->save_for_backward({a, b});
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("fathom_test::counted_mm", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
    return op.call(a, b);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    return {grads[0].mm(s[1].t()), s[0].t().mm(grads[0])};
  }
};

at::Tensor counted_mm_autograd(const at::Tensor& a, const at::Tensor& b) {
  return CountedMm::apply(a, b);
}

TORCH_LIBRARY(fathom_test, m) { m.def("counted_mm(Tensor a, Tensor b) -> Tensor"); }
TORCH_LIBRARY_IMPL(fathom_test, CPU, m) { m.impl("counted_mm", &counted_mm_cpu); }
TORCH_LIBRARY_IMPL(fathom_test, Autograd, m) { m.impl("counted_mm", &counted_mm_autograd); }

at::Tensor counted_mm(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("fathom_test::counted_mm", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(a, b);
}

}  // namespace

namespace fathom {
namespace {

using test::expect_bitwise_equal;
using test::grads_of;
using test::zero_grads;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(SelectiveCheckpoint, AKeptOpsKernelDoesNotRunAgainInTheRecompute) {
  torch::manual_seed(1);
  const at::Tensor w1 = torch::randn({8, 8}).requires_grad_(),
                   w2 = torch::randn({8, 8}).requires_grad_();
  // An input that requires grad: a checkpoint's node needs one (or a named module).
  const at::Tensor x = torch::randn({4, 8}).requires_grad_();
  auto fn = [&](const at::Tensor& t) {
    return torch::tanh(counted_mm(torch::relu(counted_mm(t, w1)), w2));
  };

  auto runs = [&](const CheckpointOptions& options) {
    g_counted_mm_runs = 0;
    checkpoint(fn, x, options).sum().backward();
    return g_counted_mm_runs.load();
  };
  EXPECT_EQ(runs(CheckpointOptions()), 4) << "a block checkpoint runs both products twice";
  EXPECT_EQ(runs(CheckpointOptions().keep({"fathom_test::counted_mm"})), 2)
      << "kept products run once, in the forward";
  // Kept by the predicate on the first call only (the policy sees each call in the forward).
  int seen = 0;
  EXPECT_EQ(runs(CheckpointOptions().keep_if([&seen](const CheckpointedOp& op) {
              return op.name == "fathom_test::counted_mm" && seen++ == 0;
            })),
            3);
}

TEST(SelectiveCheckpoint, GradientsEqualThePlainRunBitForBitWithDropout) {
  torch::manual_seed(2);
  using namespace torch::nn;
  Sequential model(LayerNorm(LayerNormOptions({16})), Linear(16, 64), GELU(), Dropout(0.3),
                   Linear(64, 16), Dropout(0.2), Linear(16, 8));
  model->train();
  const at::Tensor x = torch::randn({12, 16});
  torch::manual_seed(7);
  const at::Tensor plain_out = model->forward(x);
  plain_out.pow(2).sum().backward();
  const auto plain = grads_of(*model);
  const at::Tensor plain_next = torch::rand({4});

  for (const auto& segments :
       std::vector<std::vector<CheckpointSegment>>{{{0, 7}}, {{0, 3}, {3, 7}}}) {
    zero_grads(*model);
    torch::manual_seed(7);
    const at::Tensor out =
        fathom::forward(model, x, segments, CheckpointOptions().keep(expensive_ops()));
    EXPECT_TRUE(torch::equal(out, plain_out));
    out.pow(2).sum().backward();
    expect_bitwise_equal(plain, grads_of(*model));
    // The masks were replayed and the generator is where the plain run left it.
    EXPECT_TRUE(torch::equal(torch::rand({4}), plain_next));
  }
}

TEST(SelectiveCheckpoint, ConvolutionsWithBatchNormAndAnInPlaceReluAreExact) {
  torch::manual_seed(3);
  using namespace torch::nn;
  // The ReLU changes the kept convolution's output in place: that convolution is recomputed.
  Sequential model(Conv2d(Conv2dOptions(3, 8, 3).padding(1)), BatchNorm2d(8),
                   Conv2d(Conv2dOptions(8, 8, 3).padding(1)), ReLU(ReLUOptions().inplace(true)),
                   Conv2d(Conv2dOptions(8, 4, 3).padding(1)));
  model->train();
  const at::Tensor x = torch::randn({2, 3, 8, 8});
  auto bn = model[1]->as<BatchNorm2d>();
  const at::Tensor mean0 = bn->running_mean.clone(), var0 = bn->running_var.clone();
  model->forward(x).pow(2).sum().backward();
  const auto plain = grads_of(*model);
  const at::Tensor mean = bn->running_mean.clone();
  zero_grads(*model);
  {
    torch::NoGradGuard no_grad;
    bn->running_mean.copy_(mean0);
    bn->running_var.copy_(var0);
    bn->num_batches_tracked.zero_();
  }
  fathom::forward(model, x, {{0, 5}}, CheckpointOptions().keep(expensive_ops()))
      .pow(2)
      .sum()
      .backward();
  expect_bitwise_equal(plain, grads_of(*model));
  EXPECT_TRUE(torch::equal(bn->running_mean, mean)) << "the statistics are updated once";
}

TEST(SelectiveCheckpoint, AnInPlaceChangeToAKeptOutputBeforeBackwardNamesTheOp) {
  const at::Tensor w = torch::randn({4, 4}).requires_grad_();
  const at::Tensor x = torch::randn({3, 4}).requires_grad_();
  at::Tensor y = checkpoint([&](const at::Tensor& t) { return t.mm(w); }, x,
                            CheckpointOptions().keep({"aten::mm"}));
  y.add_(1);  // the kept product, changed after the forward
  const std::string msg = error_of([&] { (y * y).sum().backward(); });
  EXPECT_NE(msg.find("aten::mm"), std::string::npos) << msg;
  EXPECT_NE(msg.find("changed in place"), std::string::npos) << msg;
}

TEST(SelectiveCheckpoint, ARecomputeThatRunsOtherOpsIsAnErrorNamingBoth) {
  const at::Tensor w = torch::randn({4, 4}).requires_grad_();
  const at::Tensor x = torch::randn({3, 4}).requires_grad_();
  int calls = 0;
  auto differs = [&](const at::Tensor& t) {
    const at::Tensor p = t.mm(w);
    return calls++ == 0 ? torch::sin(p) : torch::cos(p);
  };
  std::string msg = error_of(
      [&] { checkpoint(differs, x, CheckpointOptions().keep({"aten::mm"})).sum().backward(); });
  EXPECT_NE(msg.find("aten::cos"), std::string::npos) << msg;
  EXPECT_NE(msg.find("aten::sin"), std::string::npos) << msg;

  calls = 0;
  auto shorter = [&](const at::Tensor& t) {
    const at::Tensor p = t.mm(w);
    return calls++ == 0 ? torch::sin(p) * 2 : p * 2;
  };
  msg = error_of(
      [&] { checkpoint(shorter, x, CheckpointOptions().keep({"aten::mm"})).sum().backward(); });
  EXPECT_NE(msg.find("aten::sin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the recompute does not run the forward's ops"), std::string::npos) << msg;
}

TEST(SelectiveCheckpoint, NamesThatCannotBeKeptAreRefusedWithTheFix) {
  std::string msg = error_of([] { CheckpointOptions().keep({"aten::linear"}); });
  EXPECT_NE(msg.find("composite"), std::string::npos) << msg;
  EXPECT_NE(msg.find("aten::addmm"), std::string::npos) << msg;
  msg = error_of([] { CheckpointOptions().keep({"aten::no_such_op"}); });
  EXPECT_NE(msg.find("no operator is named \"aten::no_such_op\""), std::string::npos) << msg;
  msg = error_of([] { CheckpointOptions().keep({"mm"}); });
  EXPECT_NE(msg.find("aten::mm"), std::string::npos) << msg;
  msg = error_of([] { CheckpointOptions().keep({"aten::relu_"}); });
  EXPECT_NE(msg.find("in place"), std::string::npos) << msg;
  EXPECT_EQ(error_of([] { CheckpointOptions().keep(expensive_ops()).keep({"aten::add.Tensor"}); }),
            "");
}

// FLOPs by phase through fathom's counter: 0 the forward, 1 the backward (with its recompute).
struct Flops {
  std::int64_t forward = 0, backward = 0;
};

Flops count(const std::function<at::Tensor()>& forward) {
  detail::FlopTally tally;
  Flops f;
  {
    detail::OpFlopCallback callback(tally);
    EXPECT_TRUE(callback.registered());
    tally.set_phase(0);
    const at::Tensor loss = forward().sum();
    tally.set_phase(1);
    loss.backward();
  }
  for (const auto& e : tally.take()) (e.phase == 0 ? f.forward : f.backward) += e.flops;
  return f;
}

TEST(SelectiveCheckpoint, TheFlopCounterCountsRecomputedProductsOnly) {
  torch::manual_seed(4);
  torch::nn::Sequential model(torch::nn::Linear(32, 64), torch::nn::GELU(),
                              torch::nn::Linear(64, 16));
  const at::Tensor x = torch::randn({64, 32});
  const std::int64_t first = 2 * 64 * 32 * 64, second = 2 * 64 * 64 * 16;
  const Flops plain = count([&] { return model->forward(x); });
  ASSERT_EQ(plain.forward, first + second);
  const Flops block = count([&] { return fathom::forward(model, x, {{0, 3}}); });
  EXPECT_EQ(block.backward - plain.backward, first + second) << "everything recomputed";
  const Flops kept = count([&] {
    return fathom::forward(model, x, {{0, 3}}, CheckpointOptions().keep(expensive_ops()));
  });
  EXPECT_EQ(kept.forward, plain.forward);
  EXPECT_EQ(kept.backward, plain.backward) << "the kept products were not computed again";
  // Kept by fathom's FLOP count of the call: the larger product is kept, the smaller recomputed.
  const Flops by_flops = count([&] {
    return fathom::forward(
        model, x, {{0, 3}},
        CheckpointOptions().keep_if([&](const CheckpointedOp& op) { return op.flops >= first; }));
  });
  EXPECT_EQ(by_flops.backward - plain.backward, second);
}

// On a GPU: cuBLAS products kept, CUDA dropout masks replayed from the device's generator, and
// the fused attention kernel (whose returns include numbers beside tensors) kept.
TEST(SelectiveCheckpoint, GpuGradientsEqualThePlainRunWithDropoutAndAttention) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: this test needs a GPU";
  torch::manual_seed(5);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const at::Tensor w = torch::randn({64, 64}, cuda).requires_grad_();
  const at::Tensor x0 = torch::randn({2 * 32, 64}, cuda);
  auto fn = [&](const at::Tensor& t) {
    const at::Tensor h = torch::dropout(torch::gelu(t.mm(w)), 0.2, /*train=*/true);
    const at::Tensor q = h.view({2, 32, 4, 16}).transpose(1, 2).to(torch::kHalf);
    return at::scaled_dot_product_attention(q, q, q, {}, 0.0, /*is_causal=*/true)
        .to(torch::kFloat)
        .sum(1)
        .reshape({2, -1});
  };
  auto run = [&](bool selective) {
    w.mutable_grad() = at::Tensor();
    const at::Tensor x = x0.clone().requires_grad_();
    torch::manual_seed(9);
    const at::Tensor y =
        selective ? checkpoint(fn, x, CheckpointOptions().keep(expensive_ops())) : fn(x);
    y.pow(2).sum().backward();
    return std::vector<at::Tensor>{w.grad().clone(), x.grad().clone(), y.detach()};
  };
  expect_bitwise_equal(run(false), run(true));
}

}  // namespace
}  // namespace fathom
