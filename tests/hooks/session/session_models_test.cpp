// The session API for loops that are not one Sequential and one optimizer (issue 16): several
// models and optimizers (a GAN), custom modules run through fathom::forward, activation bytes
// that were not measured, phases that overlap, and run_main's exit path.
#include <fathom/fathom.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "analyze/fit_hardware.h"
#include "scoped_env.h"
#include "session_fixture.h"

namespace fathom {
namespace {

using test::ScopedEnv;
using test::SessionTest;

// A custom module: what most user models are (no Sequential anywhere).
struct NetImpl : torch::nn::Module {
  NetImpl(int in, int out)
      : fc1(register_module("fc1", torch::nn::Linear(in, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, out))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

// Several arguments, a tuple back.
struct PairImpl : torch::nn::Module {
  PairImpl() : fc(register_module("fc", torch::nn::Linear(4, 4))) {}
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& a, const torch::Tensor& b) {
    return {fc(a), fc(b) * 2};
  }
  torch::nn::Linear fc;
};
TORCH_MODULE(Pair);

std::int64_t parameter_count(torch::nn::Module& m) {
  std::int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

// A GAN's loop: two custom models, two Adams, every phase in braces. through_fathom: the models
// run through fathom::forward (else model->forward, which fathom cannot see).
void train_gan(Session& session, Net& g, Net& d, torch::optim::Adam& og, torch::optim::Adam& od,
               int steps, bool through_fathom) {
  auto run = [&](Net& m, const torch::Tensor& x) {
    return through_fathom ? fathom::forward(m, x) : m->forward(x);
  };
  auto e = session.epoch();
  for (int i = 0; i < steps; ++i) {
    auto step = e.step(8);
    auto z = step.to_device(torch::randn({8, 16}), torch::kCPU);
    auto real = step.to_device(torch::randn({8, 24}), torch::kCPU);
    torch::Tensor d_loss, g_loss;
    {
      auto f = step.forward();
      auto fake = run(g, z);
      d_loss =
          torch::softplus(-run(d, real)).mean() + torch::softplus(run(d, fake.detach())).mean();
      g_loss = torch::softplus(-run(d, fake)).mean();
    }
    {
      auto b = step.backward();
      od.zero_grad();
      og.zero_grad();
      d_loss.backward({}, /*retain_graph=*/true);
      g_loss.backward();
    }
    {
      auto o = step.optimizer();
      od.step();
      og.step();
    }
  }
}

TEST_F(SessionTest, EveryWatchedModelAndOptimizerIsInTheFootprint) {
  Session session(Options().report_dir(dir()).run_name("gan").print_report(false));
  Net g(16, 24), d(24, 1);
  torch::optim::Adam og(g->parameters()), od(d->parameters());
  session.watch(*g);
  session.watch(og);
  session.watch(*d);
  session.watch(od);
  session.watch(*d);  // watched twice: counted once
  train_gan(session, g, d, og, od, 2, /*through_fathom=*/true);
  const auto& f = session.report().epochs.at(0).footprint;
  ASSERT_TRUE(f.has_value());
  const std::int64_t pg = parameter_count(*g), pd = parameter_count(*d);
  EXPECT_EQ(f->parameter_count, pg + pd);  // before: the discriminator's only
  EXPECT_EQ(f->parameter_bytes, (pg + pd) * 4);
  EXPECT_EQ(f->gradient_bytes, (pg + pd) * 4);
  ASSERT_TRUE(f->optimizer_state_bytes.has_value());
  EXPECT_EQ(*f->optimizer_state_bytes, (pg + pd) * 8);  // Adam: two moments per parameter
  ASSERT_EQ(f->models.size(), 2u);
  EXPECT_EQ(f->models[0].name, "Net");
  EXPECT_EQ(f->models[1].name, "Net #2");
  EXPECT_EQ(f->models[0].parameter_count, pg);
  EXPECT_EQ(f->models[1].parameter_count, pd);
  EXPECT_EQ(f->models[0].optimizer_state_bytes, pg * 8);
  EXPECT_EQ(f->models[1].optimizer_state_bytes, pd * 8);
  // Both custom models ran through fathom::forward: their activations were measured.
  ASSERT_TRUE(f->activation_bytes.has_value());
  EXPECT_GT(*f->activation_bytes, 0);
  // The JSON has the per-model shares and reads back.
  RunReport back = parse_json_report(format_json_report(session.report()), "gan.json");
  ASSERT_EQ(back.epochs.at(0).footprint->models.size(), 2u);
  EXPECT_EQ(back.epochs.at(0).footprint->models[1].optimizer_state_bytes, pd * 8);
}

// The done-when: the two-model, two-optimizer loop of custom modules under
// FATHOM_MODE=auto (mixed precision and checkpointing free to act) trains to the end, across
// epochs, with finite losses and a report. (The LSTM's part is amp_failure_test.cpp's.)
TEST_F(SessionTest, TheGanTrainsUnderAutoModeWithoutCrashing) {
  ScopedEnv mode("FATHOM_MODE", "auto");
  Session session(Options().report_dir(dir()).run_name("gan-auto").print_report(false));
  ASSERT_EQ(session.options().mode(), Mode::Auto);
  torch::manual_seed(0);
  Net g(16, 24), d(24, 1);
  torch::optim::Adam og(g->parameters()), od(d->parameters());
  session.watch(*g);
  session.watch(*d);
  session.watch(og);
  session.watch(od);
  for (int epoch = 0; epoch < 2; ++epoch)
    train_gan(session, g, d, og, od, 40, /*through_fathom=*/true);
  ASSERT_EQ(session.report().epochs.size(), 2u);
  for (const auto& p : g->parameters()) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
  for (const auto& p : d->parameters()) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
  EXPECT_EQ(session.report().epochs.at(1).failed_steps, 0);
}

TEST_F(SessionTest, AModelOutsideEveryOptimizerHasNoOptimizerShare) {
  Session session(Options().report_dir(dir()).print_report(false));
  Net g(16, 24), d(24, 1);
  torch::optim::Adam og(g->parameters()), od(d->parameters());
  session.watch(*g);
  session.watch(*d);
  session.watch(og);  // od is not watched
  train_gan(session, g, d, og, od, 1, /*through_fathom=*/true);
  const auto& f = session.report().epochs.at(0).footprint;
  ASSERT_TRUE(f.has_value());
  ASSERT_EQ(f->models.size(), 2u);
  EXPECT_EQ(f->models[0].optimizer_state_bytes, parameter_count(*g) * 8);
  EXPECT_FALSE(f->models[1].optimizer_state_bytes.has_value());
  EXPECT_EQ(f->optimizer_state_bytes, parameter_count(*g) * 8);  // what the watched one holds
}

TEST_F(SessionTest, ActivationsOfAModelFathomDidNotSeeAreNotMeasuredNotZero) {
  Session session(Options().report_dir(dir()).run_name("unseen").print_report(false));
  Net g(16, 24), d(24, 1);
  torch::optim::Adam og(g->parameters()), od(d->parameters());
  session.watch(*g);
  session.watch(*d);
  session.watch(og);
  session.watch(od);
  train_gan(session, g, d, og, od, 2, /*through_fathom=*/false);
  const EpochSummary& e = session.report().epochs.at(0);
  ASSERT_TRUE(e.footprint.has_value());
  EXPECT_FALSE(e.footprint->activation_bytes.has_value());  // before: 0
  EXPECT_NE(e.footprint->activation_why.find("fathom::forward"), std::string::npos)
      << e.footprint->activation_why;
  // No configuration is sized from a number fathom did not measure.
  const HardwareFit fit = hardware_fit(*e.footprint, e.device_memory, std::nullopt);
  for (const FitVariant& v : fit.variants) {
    EXPECT_FALSE(v.need_bytes.has_value());
    EXPECT_NE(v.why.find("activation bytes not measured"), std::string::npos) << v.why;
  }
  const std::string json = format_json_report(session.report());
  EXPECT_NE(json.find("\"activation_bytes\": null"), std::string::npos);
  EXPECT_NE(json.find("\"activation_bytes_why\": \"no model ran through"), std::string::npos);
}

TEST_F(SessionTest, ForwardTakesAnyModuleHolder) {
  Session session(Options().report_dir(dir()).print_report(false));
  Net net(8, 4);
  Pair pair;
  session.watch(*net);
  auto e = session.epoch();
  auto step = e.step(2);
  auto f = step.forward();
  torch::manual_seed(0);
  const torch::Tensor x = torch::randn({2, 8});
  EXPECT_TRUE(torch::equal(fathom::forward(net, x), net->forward(x)));
  torch::Tensor moved = x.clone();
  EXPECT_TRUE(torch::equal(fathom::forward(net, std::move(moved)), net->forward(x)));
  const torch::Tensor a = torch::randn({2, 4}), b = torch::randn({2, 4});
  auto [p, q] = fathom::forward(pair, a, b);
  auto [p0, q0] = pair->forward(a, b);
  EXPECT_TRUE(torch::equal(p, p0));
  EXPECT_TRUE(torch::equal(q, q0));
  // A child through fathom::forward inside a custom forward is the one-line edit for its range.
  EXPECT_TRUE(torch::equal(fathom::forward(net->fc1, x), net->fc1(x)));
}

// The official LibTorch examples' style: a module class used as an object, no holder.
struct PlainNet : torch::nn::Module {
  PlainNet() : fc(register_module("fc", torch::nn::Linear(8, 4))) {}
  torch::Tensor forward(torch::Tensor x) { return torch::relu(fc(x)); }
  torch::nn::Linear fc;
};

// Issue 24: fathom::forward and fathom::block take every module form a loop holds (before, a
// plain module and a ModuleList item did not compile).
TEST_F(SessionTest, ForwardAndBlockTakeEveryModuleForm) {
  Session session(Options().report_dir(dir()).print_report(false));
  PlainNet plain;
  auto shared = std::make_shared<NetImpl>(8, 4);
  torch::nn::ModuleList list(Net(8, 8), Net(8, 4));
  torch::nn::ModuleDict dict;
  dict->update({{"head", Net(8, 4).ptr()}});
  auto e = session.epoch();
  auto step = e.step(2);
  auto f = step.forward();
  const torch::Tensor x = torch::randn({2, 8});
  EXPECT_TRUE(torch::equal(fathom::forward(plain, x), plain.forward(x)));
  EXPECT_TRUE(torch::equal(fathom::block(plain, x), plain.forward(x)));
  EXPECT_TRUE(torch::equal(fathom::forward(shared, x), shared->forward(x)));
  torch::Tensor h = x, reference = x;
  for (const auto& layer : *list) h = fathom::block<NetImpl>(layer, h);
  for (const auto& layer : *list) reference = layer->as<NetImpl>()->forward(reference);
  EXPECT_TRUE(torch::equal(h, reference));
  // The holder's name does as well as the class's.
  EXPECT_TRUE(torch::equal(fathom::block<Net>(list[0], x), list[0]->as<NetImpl>()->forward(x)));
  EXPECT_TRUE(torch::equal(fathom::forward<NetImpl>(dict["head"], x),
                           dict["head"]->as<NetImpl>()->forward(x)));
  // A wrong name is an error that names the item's type.
  try {
    (void)fathom::block<torch::nn::LinearImpl>(list[0], x);
    ADD_FAILURE() << "no error for a wrong type";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("NetImpl"), std::string::npos) << err.what();
  }
}

// A plain module object through fathom::forward is measured as a block: its activations are in
// the footprint.
TEST_F(SessionTest, APlainModuleObjectIsMeasuredAsABlock) {
  Session session(Options().report_dir(dir()).print_report(false));
  PlainNet plain;
  torch::optim::SGD optimizer(plain.parameters(), 0.1);
  session.watch(plain);
  {
    auto e = session.epoch();
    for (int i = 0; i < 2; ++i) {
      auto step = e.step(4);
      torch::Tensor loss;
      {
        auto f = step.forward();
        loss = fathom::forward(plain, torch::randn({4, 8})).sum();
      }
      {
        auto b = step.backward();
        optimizer.zero_grad();
        loss.backward();
      }
      {
        auto o = step.optimizer();
        optimizer.step();
      }
    }
  }
  const EpochSummary& e = session.report().epochs.at(0);
  ASSERT_TRUE(e.footprint.has_value());
  EXPECT_TRUE(e.footprint->activation_bytes.has_value()) << e.footprint->activation_why;
}

// Issue 24: an exception before an epoch's first step left an empty epoch as the run's last
// report, the one printed in full at its end.
TEST_F(SessionTest, AnEpochAnExceptionEndsBeforeItsFirstStepLeavesNoReport) {
  Session session(Options().report_dir(dir()).run_name("early").print_report(false));
  {
    auto e = session.epoch();
    auto step = e.step(1);
  }
  ::testing::internal::CaptureStderr();
  try {
    auto e = session.epoch();
    throw std::runtime_error("the loader broke");
  } catch (const std::runtime_error&) {
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(session.report().epochs.size(), 1u);
  EXPECT_EQ(session.report().epochs.back().steps, 1);
  EXPECT_NE(err.find("before its first step"), std::string::npos) << err;
}

TEST_F(SessionTest, APhaseOpenedInsideAnotherIsNamedWithTheFix) {
  std::vector<std::string> warnings;
  Session session(Options().report_dir(dir()).print_report(false).warnings(
      [&](std::string_view m) { warnings.emplace_back(m); }));
  auto model = tiny_model();
  {
    auto e = session.epoch();
    auto step = e.step(4);
    auto x = step.to_device(torch::randn({4, 8}), torch::kCPU);
    // The mistake of the issue: scopes without braces stay open to the step's end.
    auto f = step.forward();
    auto loss = fathom::forward(model, x).sum();
    auto b = step.backward();
    loss.backward();
  }
  bool named = false;
  for (const std::string& w : warnings)
    named = named || (w.find("phase backward opened in step 0 while phase forward is still open") !=
                          std::string::npos &&
                      w.find("{ auto f = step.forward(); ... }") != std::string::npos);
  EXPECT_TRUE(named) << (warnings.empty() ? "no warning" : warnings.front());
  bool noted = false;
  for (const auto& u : session.report().environment.not_measured)
    noted = noted || u.what == "separate phase times";
  EXPECT_TRUE(noted);
}

TEST_F(SessionTest, ToDeviceInsideAPhaseIsNoNestedPhase) {
  std::vector<std::string> warnings;
  Session session(Options().report_dir(dir()).print_report(false).warnings(
      [&](std::string_view m) { warnings.emplace_back(m); }));
  {
    auto e = session.epoch();
    auto step = e.step(4);
    auto f = step.forward();
    auto x = step.to_device(torch::randn({4, 8}), torch::kCPU);
  }
  for (const std::string& w : warnings) EXPECT_EQ(w.find("still open"), std::string::npos) << w;
  EXPECT_EQ(session.report().epochs.at(0).phase(Phase::Copy).count, 0);
}

TEST_F(SessionTest, RunMainTurnsABadVariableIntoAMessageAndAStatus) {
  ScopedEnv mode("FATHOM_MODE", "sugest");
  ScopedEnv folder("FATHOM_REPORT_DIR", dir().c_str());
  testing::internal::CaptureStderr();
  const int status = run_main([] {
    Session session;  // throws: a bad FATHOM_MODE
    return 0;
  });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, kExitFathomError);
  EXPECT_NE(err.find("fathom: "), std::string::npos) << err;
  EXPECT_NE(err.find("FATHOM_MODE"), std::string::npos) << err;
}

TEST_F(SessionTest, RunMainWritesTheReportOfAnEpochAnErrorEnded) {
  testing::internal::CaptureStderr();
  std::string path;
  const int status = run_main([&] {
    Session session(Options().report_dir(dir()).run_name("ended").print_report(false));
    path = session.report_path();
    auto e = session.epoch();
    auto step = e.step(1);
    throw std::runtime_error("the loader broke");
  });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, kExitOtherError);
  EXPECT_NE(err.find("error: the loader broke"), std::string::npos) << err;
  EXPECT_TRUE(fs::exists(path)) << path;
  EXPECT_EQ(run_main([] { return 7; }), 7);
  EXPECT_EQ(run_main([] {}), 0);
}

}  // namespace
}  // namespace fathom
