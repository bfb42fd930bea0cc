// GradScaler against the behaviour of torch.amp.GradScaler (PyTorch's test_grad_scaling_*):
// inf skips the step and backs the scale off, clean steps grow it, unscale_ before clipping,
// one unscale_ per step, state round trips.
#include <fathom/error.h>
#include <fathom/grad_scaler.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <sstream>

namespace fathom {
namespace {

struct Tiny {
  torch::nn::Linear model{nullptr};
  std::unique_ptr<torch::optim::SGD> optimizer;
  torch::Tensor x, y;

  explicit Tiny(std::uint64_t seed = 0) {
    torch::manual_seed(seed);
    model = torch::nn::Linear(4, 2);
    optimizer =
        std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
    x = torch::randn({8, 4});
    y = torch::randn({8, 2});
  }
  torch::Tensor loss() { return torch::mse_loss(model(x), y); }
  // One scaled iteration; poison puts an inf into a gradient before the step.
  bool iteration(GradScaler& scaler, bool poison = false) {
    optimizer->zero_grad();
    scaler.scale(loss()).backward();
    if (poison) model->weight.mutable_grad()[0][0] = std::numeric_limits<float>::infinity();
    const bool stepped = scaler.step(*optimizer);
    scaler.update();
    return stepped;
  }
};

TEST(GradScaler, ScalesByTheInitialScale) {
  GradScaler scaler;
  const auto loss = torch::tensor(1.5);
  EXPECT_DOUBLE_EQ(scaler.scale(loss).item<double>(), 1.5 * 65536);
  const auto both =
      scaler.scale(std::vector<torch::Tensor>{torch::tensor(1.0), torch::tensor(2.0)});
  EXPECT_DOUBLE_EQ(both[1].item<double>(), 2 * 65536.0);
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 65536);
}

TEST(GradScaler, InjectedInfSkipsTheStepAndHalvesTheScale) {
  Tiny t;
  GradScaler scaler;
  const auto before = t.model->weight.clone();
  EXPECT_FALSE(t.iteration(scaler, /*poison=*/true));
  EXPECT_TRUE(torch::equal(t.model->weight, before));
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 32768);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  // NaN too.
  t.optimizer->zero_grad();
  scaler.scale(t.loss()).backward();
  t.model->bias.mutable_grad()[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(scaler.step(*t.optimizer));
  EXPECT_TRUE(scaler.skipped_since_update());
  scaler.update();
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 16384);
  EXPECT_TRUE(torch::equal(t.model->weight, before));
  // A clean step goes through.
  EXPECT_TRUE(t.iteration(scaler));
  EXPECT_FALSE(torch::equal(t.model->weight, before));
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST(GradScaler, CleanStepsGrowTheScaleEachInterval) {
  Tiny t;
  GradScaler scaler(GradScalerOptions().growth_interval(3));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(t.iteration(scaler));
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 65536);
  EXPECT_EQ(scaler.growth_tracker(), 2);
  EXPECT_TRUE(t.iteration(scaler));
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 131072);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  // An inf resets the count: 2 clean, inf, 2 clean do not grow it.
  t.iteration(scaler);
  t.iteration(scaler);
  t.iteration(scaler, true);
  t.iteration(scaler);
  t.iteration(scaler);
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 65536);
}

TEST(GradScaler, TwoThousandCleanStepsDoubleTheDefaultScale) {
  torch::manual_seed(0);
  torch::nn::Linear model(2, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(1e-3));
  const auto x = torch::randn({4, 2});
  const auto y = torch::randn({4, 1});
  GradScaler scaler;
  for (int i = 0; i < 1999; ++i) {
    optimizer.zero_grad();
    scaler.scale(torch::mse_loss(model(x), y)).backward();
    ASSERT_TRUE(scaler.step(optimizer)) << i;
    scaler.update();
  }
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 65536);
  EXPECT_EQ(scaler.growth_tracker(), 1999);
  optimizer.zero_grad();
  scaler.scale(torch::mse_loss(model(x), y)).backward();
  scaler.step(optimizer);
  scaler.update();
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 131072);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, UnscaleThenClipMatchesTheUnscaledRun) {
  Tiny scaled_run(1), plain_run(1);
  GradScaler scaler;
  for (int i = 0; i < 3; ++i) {
    scaled_run.optimizer->zero_grad();
    scaler.scale(scaled_run.loss()).backward();
    scaler.unscale_(*scaled_run.optimizer);
    // Powers-of-two scales unscale exactly: the gradients are the plain ones, bit for bit.
    plain_run.optimizer->zero_grad();
    plain_run.loss().backward();
    EXPECT_TRUE(torch::equal(scaled_run.model->weight.grad(), plain_run.model->weight.grad()));
    const double norm = torch::nn::utils::clip_grad_norm_(scaled_run.model->parameters(), 0.01);
    const double plain_norm =
        torch::nn::utils::clip_grad_norm_(plain_run.model->parameters(), 0.01);
    EXPECT_DOUBLE_EQ(norm, plain_norm);
    EXPECT_GT(norm, 0.01);  // the clip did something
    EXPECT_TRUE(scaler.step(*scaled_run.optimizer));
    scaler.update();
    plain_run.optimizer->step();
    EXPECT_TRUE(torch::equal(scaled_run.model->weight, plain_run.model->weight));
  }
}

TEST(GradScaler, UnscaleTwiceOrAfterStepIsAnError) {
  Tiny t;
  GradScaler scaler;
  scaler.scale(t.loss()).backward();
  scaler.unscale_(*t.optimizer);
  try {
    scaler.unscale_(*t.optimizer);
    FAIL() << "unscale_ twice must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already called"), std::string::npos) << e.what();
  }
  scaler.step(*t.optimizer);
  EXPECT_THROW(scaler.unscale_(*t.optimizer), Error);
  EXPECT_THROW(scaler.step(*t.optimizer), Error);
  scaler.update();
  // The next iteration may unscale again.
  t.optimizer->zero_grad();
  scaler.scale(t.loss()).backward();
  EXPECT_NO_THROW(scaler.unscale_(*t.optimizer));
}

TEST(GradScaler, MisuseNamesTheFix) {
  Tiny t;
  GradScaler scaler;
  EXPECT_THROW(scaler.step(*t.optimizer), Error);  // nothing scaled yet
  EXPECT_THROW(scaler.update(), Error);
  scaler.scale(t.loss());
  EXPECT_THROW(scaler.update(), Error);  // no step since
  EXPECT_THROW(GradScaler(GradScalerOptions().growth_factor(1.0)), Error);
  EXPECT_THROW(GradScaler(GradScalerOptions().backoff_factor(1.0)), Error);
  EXPECT_THROW(GradScaler(GradScalerOptions().growth_interval(0)), Error);
  EXPECT_THROW(GradScaler(GradScalerOptions().init_scale(0)), Error);
}

TEST(GradScaler, Fp16GradientsAreRefused) {
  torch::nn::Linear half(2, 2);
  half->to(torch::kHalf);
  torch::optim::SGD optimizer(half->parameters(), torch::optim::SGDOptions(0.1));
  GradScaler scaler;
  half->weight.mutable_grad() = torch::ones({2, 2}, torch::kHalf);
  scaler.scale(torch::tensor(1.0));
  EXPECT_THROW(scaler.unscale_(optimizer), Error);
}

TEST(GradScaler, EachOptimizerIsCheckedAndAnyInfBacksOff) {
  torch::manual_seed(0);
  torch::nn::Linear a(2, 2), b(2, 2);
  torch::optim::SGD opt_a(a->parameters(), torch::optim::SGDOptions(0.1));
  torch::optim::SGD opt_b(b->parameters(), torch::optim::SGDOptions(0.1));
  GradScaler scaler;
  const auto x = torch::randn({3, 2});
  scaler.scale((a(x) + b(x)).sum()).backward();
  b->weight.mutable_grad()[0][0] = std::numeric_limits<float>::infinity();
  const auto a_before = a->weight.clone(), b_before = b->weight.clone();
  EXPECT_TRUE(scaler.step(opt_a));
  EXPECT_FALSE(scaler.step(opt_b));
  scaler.update();
  EXPECT_FALSE(torch::equal(a->weight, a_before));
  EXPECT_TRUE(torch::equal(b->weight, b_before));
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 32768);
}

TEST(GradScaler, StateRoundTripsAsStructAndThroughTorchSerialize) {
  Tiny t;
  GradScaler scaler(GradScalerOptions().growth_interval(7).growth_factor(4).backoff_factor(0.25));
  t.iteration(scaler, true);
  t.iteration(scaler);
  t.iteration(scaler);
  const GradScalerState s = scaler.state();
  EXPECT_DOUBLE_EQ(s.scale, 16384);
  EXPECT_EQ(s.growth_tracker, 2);
  EXPECT_EQ(s.growth_interval, 7);

  GradScaler from_struct;
  from_struct.load_state(s);
  EXPECT_DOUBLE_EQ(from_struct.get_scale(), 16384);
  EXPECT_EQ(from_struct.growth_tracker(), 2);
  EXPECT_DOUBLE_EQ(from_struct.options().growth_factor(), 4);

  std::stringstream buffer;
  torch::save(scaler, buffer);
  GradScaler from_archive;
  torch::load(from_archive, buffer);
  const GradScalerState r = from_archive.state();
  EXPECT_DOUBLE_EQ(r.scale, s.scale);
  EXPECT_EQ(r.growth_tracker, s.growth_tracker);
  EXPECT_EQ(r.growth_interval, 7);
  EXPECT_DOUBLE_EQ(r.backoff_factor, 0.25);
  // The loaded scaler carries on where the saved one was: 5 more clean steps grow it by 4.
  Tiny u;
  for (int i = 0; i < 5; ++i) u.iteration(from_archive);
  EXPECT_DOUBLE_EQ(from_archive.get_scale(), 65536);

  // Saving in mid-iteration would lose the pending inf checks.
  t.optimizer->zero_grad();
  scaler.scale(t.loss()).backward();
  scaler.step(*t.optimizer);
  std::stringstream mid;
  EXPECT_THROW(torch::save(scaler, mid), Error);
}

TEST(GradScaler, DisabledPassesEverythingThrough) {
  Tiny t;
  GradScaler scaler(GradScalerOptions().enabled(false));
  const auto loss = t.loss();
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  loss.backward();
  const auto before = t.model->weight.clone();
  EXPECT_NO_THROW(scaler.unscale_(*t.optimizer));
  EXPECT_TRUE(scaler.step(*t.optimizer));
  EXPECT_FALSE(torch::equal(t.model->weight, before));
  EXPECT_NO_THROW(scaler.update());
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 1.0);
  EXPECT_FALSE(scaler.is_enabled());
}

TEST(GradScalerGpu, CudaGradientsSkipAndBackOffOnTheDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Tiny t;
  t.model->to(torch::kCUDA);
  t.x = t.x.cuda();
  t.y = t.y.cuda();
  t.optimizer =
      std::make_unique<torch::optim::SGD>(t.model->parameters(), torch::optim::SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().growth_interval(2));
  const auto before = t.model->weight.clone();
  EXPECT_FALSE(t.iteration(scaler, true));
  EXPECT_TRUE(torch::equal(t.model->weight, before));
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 32768);
  EXPECT_TRUE(t.iteration(scaler));
  EXPECT_TRUE(t.iteration(scaler));
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 65536);
}

}  // namespace
}  // namespace fathom
