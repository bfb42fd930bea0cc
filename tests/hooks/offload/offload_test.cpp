// fathom::offload on the CPU: the copy path (OffloadOptions::cpu_copy) gives the plain run's
// gradients bit for bit and frees what it copied; an in-place change after the save is an error
// naming the ops; without a device the saved tensors are kept, and a warning says so.
#include <fathom/checkpoint.h>
#include <fathom/error.h>
#include <fathom/offload.h>
#include <fathom/session.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gradient_compare.h"
#include "measure/saved_tensor_meter.h"

namespace fathom {
namespace {

using test::expect_bitwise_equal;
using test::grads_of;
using test::zero_grads;

OffloadOptions copy_all(const OffloadMeter& meter) {
  return OffloadOptions().cpu_copy(true).min_bytes(0).meter(meter);
}

// Runs the Sequential's items one by one, each offloaded when a meter is given: a chain of units.
at::Tensor run_chain(torch::nn::Sequential& seq, at::Tensor x, const OffloadMeter* meter) {
  for (torch::nn::AnyModule& item : *seq) {
    if (meter)
      x = offload([&item](const at::Tensor& in) { return item.forward(in); }, x, copy_all(*meter));
    else
      x = item.forward(x);
  }
  return x;
}

torch::nn::Sequential mlp() {
  torch::manual_seed(3);
  using namespace torch::nn;
  return Sequential(Linear(16, 64), ReLU(), Linear(64, 64), Tanh(), Linear(64, 64), GELU(),
                    Linear(64, 4));
}

torch::nn::Sequential conv_net() {
  torch::manual_seed(5);
  using namespace torch::nn;
  return Sequential(Conv2d(Conv2dOptions(3, 8, 3).padding(1)), BatchNorm2d(8), ReLU(),
                    Conv2d(Conv2dOptions(8, 8, 3).stride(2).padding(1)), BatchNorm2d(8), ReLU(),
                    AdaptiveAvgPool2d(AdaptiveAvgPool2dOptions({1, 1})), Flatten(), Linear(8, 3));
}

void expect_offload_matches_plain(torch::nn::Sequential seq, const at::Tensor& x) {
  seq->train();
  // BatchNorm's running statistics are part of the state: both runs start from the same.
  std::vector<at::Tensor> buffers;
  for (const auto& b : seq->buffers()) buffers.push_back(b.clone());
  const at::Tensor plain_out = run_chain(seq, x, nullptr);
  plain_out.pow(2).sum().backward();
  const auto plain = grads_of(*seq);

  zero_grads(*seq);
  {
    torch::NoGradGuard no_grad;
    auto live = seq->buffers();
    for (std::size_t i = 0; i < live.size(); ++i) live[i].copy_(buffers[i]);
  }
  OffloadMeter meter;
  const at::Tensor out = run_chain(seq, x, &meter);
  EXPECT_TRUE(torch::equal(out, plain_out));
  out.pow(2).sum().backward();
  expect_bitwise_equal(plain, grads_of(*seq), "offloaded");

  const OffloadSummary s = meter.summary();
  EXPECT_EQ(s.calls, static_cast<std::int64_t>(seq->size()));
  EXPECT_GT(s.offloaded_tensors, 0);
  EXPECT_GT(s.offloaded_bytes, 0);
  // Every unit but the last (the first backward runs) came back one unit ahead.
  EXPECT_GT(s.prefetched, 0);
  EXPECT_GT(s.fetched_late, 0);
  EXPECT_EQ(s.prefetched + s.fetched_late, s.offloaded_tensors);
  EXPECT_TRUE(s.fallback.empty()) << s.fallback;
  EXPECT_EQ(s.timed_copies, 0);  // the CPU path is not a link
}

TEST(Offload, MlpGradientsEqualThePlainRunBitForBit) {
  expect_offload_matches_plain(mlp(), torch::randn({32, 16}).requires_grad_(true));
}

TEST(Offload, ConvNetGradientsEqualThePlainRunBitForBit) {
  expect_offload_matches_plain(conv_net(), torch::randn({4, 3, 16, 16}));
}

// A unit's tensors come back ahead (in the next unit's backward) only up to prefetch_ahead_bytes,
// the last saved first: a joint plan gives the budget's free bytes there, so the prefetch cannot
// push that backward over the budget. The rest come back at the unit's own backward.
TEST(Offload, APrefetchAheadLimitBringsBackOnlyWhatFits) {
  constexpr std::int64_t kTensorBytes = 32 * 64 * 4;  // each of unit 1's three saved outputs
  auto run = [](std::int64_t limit, OffloadSummary& first, at::Tensor& grad) {
    const at::Tensor x = torch::linspace(-2, 2, 32 * 64).reshape({32, 64}).requires_grad_(true);
    OffloadMeter m1, m2;
    at::Tensor y = offload([](const at::Tensor& in) { return in.tanh().sigmoid().exp(); }, x,
                           copy_all(m1).prefetch_ahead_bytes(limit));
    y = offload([](const at::Tensor& in) { return in.tanh(); }, y, copy_all(m2));
    y.sum().backward();
    first = m1.summary();
    grad = x.grad();
  };
  OffloadSummary all, one, none;
  at::Tensor g_all, g_one, g_none;
  run(-1, all, g_all);
  run(kTensorBytes + kTensorBytes / 2, one, g_one);
  run(0, none, g_none);
  EXPECT_EQ(all.offloaded_tensors, 3);
  EXPECT_EQ(all.prefetched, 3);
  EXPECT_EQ(one.prefetched, 1);  // exp's output, the first backward needs; 1.5 tensors fit
  EXPECT_EQ(one.fetched_late, 2);
  EXPECT_EQ(none.prefetched, 0);
  EXPECT_EQ(none.fetched_late, 3);
  EXPECT_TRUE(torch::equal(g_all, g_one));
  EXPECT_TRUE(torch::equal(g_all, g_none));
}

// fetch_ahead(1): the unit's own backward brings its tensors back in the order it uses them, one
// ahead of the one in use, not all when it begins: when the gradient of each saved output is
// ready (a hook on it), the copies started so far are the ones backward has used and one more.
TEST(Offload, AFetchWindowBringsBackOneAheadOfTheTensorInUse) {
  auto run = [](int fetch_ahead, std::vector<std::int64_t>& fetched_at, at::Tensor& grad) {
    const at::Tensor x = torch::linspace(-2, 2, 32 * 64).reshape({32, 64}).requires_grad_(true);
    OffloadMeter meter;
    std::vector<std::int64_t> at(3, -1);
    auto fn = [&](const at::Tensor& in) {
      // Each op saves its output: h1, h2, h3, h4, used in backward in the reverse order.
      const at::Tensor h1 = in.tanh(), h2 = h1.sigmoid(), h3 = h2.exp(), h4 = h3.tanh();
      const at::Tensor* hs[] = {&h1, &h2, &h3};
      for (int k = 0; k < 3; ++k)
        hs[k]->register_hook(
            [&meter, &at, k](const at::Tensor&) { at[k] = meter.summary().fetched_late; });
      return h4;
    };
    const at::Tensor y = offload(fn, x, copy_all(meter).fetch_ahead(fetch_ahead));
    y.sum().backward();
    const OffloadSummary s = meter.summary();
    EXPECT_EQ(s.offloaded_tensors, 4);
    EXPECT_EQ(s.fetched_late, 4);
    fetched_at = at;
    grad = x.grad();
  };
  std::vector<std::int64_t> windowed, all;
  at::Tensor g_windowed, g_all;
  run(1, windowed, g_windowed);
  run(-1, all, g_all);
  // h3's gradient comes after tanh's backward used h4 (h3 already back with it), h2's after
  // exp's used h3 (h2 started then), h1's after sigmoid's used h2.
  EXPECT_EQ(windowed, (std::vector<std::int64_t>{4, 3, 2}));
  EXPECT_EQ(all, (std::vector<std::int64_t>{4, 4, 4}));
  EXPECT_TRUE(torch::equal(g_windowed, g_all));
}

TEST(Offload, ModuleFormTakesOptionsAndSkipsSmallStorages) {
  torch::manual_seed(2);
  torch::nn::Linear lin(64, 64);
  const at::Tensor x = torch::randn({8, 64});  // data: Linear saves it for the weight's gradient
  OffloadMeter meter;
  // The input's storage (2 KiB) is below the threshold: it stays.
  const at::Tensor y =
      offload(lin, x, OffloadOptions().cpu_copy(true).min_bytes(4096).meter(meter));
  y.sum().backward();
  const OffloadSummary s = meter.summary();
  EXPECT_EQ(s.offloaded_tensors, 0);
  EXPECT_EQ(s.kept_tensors, 1);
  EXPECT_EQ(s.kept_bytes, 8 * 64 * 4);
  EXPECT_TRUE(lin->weight.grad().defined());
}

// The point of offloading: the forward's saved storage is not held by autograd, so it is freed
// when the forward's own references go (a plain run keeps it to backward).
TEST(Offload, TheSavedStorageIsFreedAfterTheForward) {
  torch::manual_seed(4);
  torch::nn::Linear a(32, 32), b(32, 32);
  const at::Tensor x = torch::randn({16, 32});
  for (bool offloaded : {false, true}) {
    std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> hidden;
    auto fn = [&](const at::Tensor& in) {
      at::Tensor h = torch::relu(a(in));  // saved by relu (its output) and by b (its input)
      hidden.emplace(h.storage().getWeakStorageImpl());
      return b(h);
    };
    OffloadMeter meter;
    const at::Tensor y = offloaded ? offload(fn, x, copy_all(meter)) : fn(x);
    ASSERT_TRUE(hidden);
    EXPECT_EQ(hidden->expired(), offloaded) << (offloaded ? "offloaded" : "plain");
    y.sum().backward();
    if (offloaded) {
      // relu and b saved one storage: copied once, brought back once, for both.
      EXPECT_EQ(meter.summary().offloaded_tensors, 2);  // x and h
    }
  }
}

TEST(Offload, RetainGraphBringsTheTensorsBackAgain) {
  torch::manual_seed(6);
  auto seq = mlp();
  const at::Tensor x = torch::randn({8, 16});
  OffloadMeter meter;
  const at::Tensor loss = run_chain(seq, x, &meter).pow(2).sum();
  loss.backward({}, /*retain_graph=*/true);
  const auto once = grads_of(*seq);
  loss.backward();
  const auto twice = grads_of(*seq);
  for (std::size_t i = 0; i < once.size(); ++i)
    EXPECT_TRUE(torch::equal(twice[i], once[i] * 2)) << "gradient " << i;
}

// SavedVariable makes no in-place check when a hook holds the tensor: fathom's hook makes it, so
// the change is an error naming the node that needs the tensor and the op that changed it.
TEST(Offload, InPlaceChangeAfterTheSaveIsAnErrorNamingTheOps) {
  torch::manual_seed(8);
  torch::nn::Linear lin(16, 16);
  const at::Tensor x = torch::randn({4, 16});
  OffloadMeter meter;
  at::Tensor y =
      offload([&](const at::Tensor& in) { return torch::relu(lin(in)); }, x, copy_all(meter));
  y.add_(1);  // relu saved its output: the host copy is of the old values
  try {
    y.sum().backward();
    FAIL() << "backward ran on a stale offloaded tensor";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("modified in place"), std::string::npos) << what;
    EXPECT_NE(what.find("saved for ReluBackward0 (an output of ReluBackward0)"), std::string::npos)
        << what;
    EXPECT_NE(what.find("last by AddBackward"), std::string::npos) << what;  // changed it
    EXPECT_NE(what.find("version 1, saved at version 0"), std::string::npos) << what;
  }
}

// The same check for what the meter keeps (issue 26: kept tensors too): without it, a capture
// made autograd skip its own check and backward used the changed values silently.
TEST(Offload, InPlaceChangeUnderTheSavedTensorMeterIsAnError) {
  torch::manual_seed(9);
  torch::nn::Linear lin(16, 16);
  const at::Tensor x = torch::randn({4, 16});
  at::Tensor y;
  {
    detail::SavedTensorCapture capture;
    ASSERT_TRUE(capture.active());
    y = torch::sigmoid(lin(x));
  }
  y.mul_(2);
  EXPECT_THROW(
      {
        try {
          y.sum().backward();
        } catch (const std::exception& e) {
          EXPECT_NE(std::string(e.what()).find("SigmoidBackward0"), std::string::npos) << e.what();
          throw;
        }
      },
      std::exception);
}

TEST(Offload, NestsWithCheckpointBothWays) {
  torch::manual_seed(10);
  auto seq = mlp();
  seq->train();
  const at::Tensor x = torch::randn({8, 16});
  const at::Tensor plain_out = seq->forward(x);
  plain_out.pow(2).sum().backward();
  const auto plain = grads_of(*seq);

  // A checkpoint inside an offloaded unit: its saved inputs go to the host.
  zero_grads(*seq);
  OffloadMeter outer;
  at::Tensor out =
      offload([&](const at::Tensor& in) { return checkpoint(seq, in); }, x, copy_all(outer));
  EXPECT_TRUE(torch::equal(out, plain_out));
  out.pow(2).sum().backward();
  expect_bitwise_equal(plain, grads_of(*seq), "offloaded");
  EXPECT_EQ(outer.summary().offloaded_tensors, 1);  // the checkpoint keeps its input only

  // An offloaded unit inside a checkpoint: it offloads in the recompute, in backward.
  zero_grads(*seq);
  OffloadMeter inner;
  out = checkpoint(
      [&](const at::Tensor& in) {
        return offload([&](const at::Tensor& t) { return seq->forward(t); }, in, copy_all(inner));
      },
      x, CheckpointOptions().module(seq));
  out.pow(2).sum().backward();
  expect_bitwise_equal(plain, grads_of(*seq), "offloaded");
  EXPECT_GT(inner.summary().offloaded_tensors, 0);
}

// No device to offload from: the tensors are kept, the training goes on, and the session's
// warnings say why once.
TEST(Offload, OnTheCpuTheTensorsAreKeptAndAWarningSaysWhy) {
  std::vector<std::string> said;
  const auto dir = std::filesystem::temp_directory_path() / "fathom-offload-test";
  Session session(Options()
                      .mode(Mode::Observe)
                      .print_report(false)
                      .report_dir(dir.string())
                      .warnings([&](std::string_view m) {
                        if (m.find("offload") != std::string_view::npos) said.emplace_back(m);
                      }));
  torch::manual_seed(11);
  auto seq = mlp();
  const at::Tensor x = torch::randn({8, 16});
  const at::Tensor plain_out = seq->forward(x);
  plain_out.pow(2).sum().backward();
  const auto plain = grads_of(*seq);
  zero_grads(*seq);

  OffloadMeter meter;
  const at::Tensor out = offload([&](const at::Tensor& in) { return seq->forward(in); }, x,
                                 OffloadOptions().min_bytes(0).meter(meter).name("mlp"));
  out.pow(2).sum().backward();
  expect_bitwise_equal(plain, grads_of(*seq), "offloaded");
  const OffloadSummary s = meter.summary();
  EXPECT_EQ(s.offloaded_tensors, 0);
  EXPECT_GT(s.kept_tensors, 0);
  EXPECT_NE(s.fallback.find("on the CPU"), std::string::npos) << s.fallback;
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("fathom::offload (mlp)"), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("kept as autograd keeps them"), std::string::npos) << said[0];
}

TEST(Offload, BadInputIsAnErrorThatSaysWhatToDo) {
  const at::Tensor x = torch::randn({2, 2});
  EXPECT_THROW(offload([](const at::Tensor& t) { return t * 2; }, at::Tensor()), Error);
  try {
    offload([](const at::Tensor& t) { return t * 2; }, x, OffloadOptions().min_bytes(-1));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("min_bytes is -1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fathom
