// Auto mixed precision must not break training (issue 16): state a bf16 step leaves behind (an
// LSTM's hidden state carried to the next step) meets the watch's fp32 steps and the fp32 steps
// after a rollback; a step that fails under mixed precision, or as a comparison step, turns it
// off for good with the reason in the report, and guarded_step runs the step again in fp32.
#include <fathom/fathom.h>
#include <fathom/guarded_step.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <tuple>

#include "session_fixture.h"

namespace fathom {
namespace {

using test::SessionTest;
namespace F = torch::nn::functional;

// A small language model like the issue's: embedding, LSTM, a head; tuple state.
struct LmImpl : torch::nn::Module {
  torch::nn::Embedding embed{nullptr};
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Linear head{nullptr};
  LmImpl() {
    embed = register_module("embed", torch::nn::Embedding(32, 16));
    lstm =
        register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(16, 32).batch_first(true)));
    head = register_module("head", torch::nn::Linear(32, 32));
  }
  std::pair<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>> forward(
      const torch::Tensor& tokens, const std::tuple<torch::Tensor, torch::Tensor>& state) {
    auto [out, next] = lstm->forward(embed->forward(tokens), state);
    return {head->forward(out), next};
  }
};
TORCH_MODULE(Lm);

struct LstmRun {
  std::vector<std::string> kinds;
  std::vector<torch::ScalarType> state_dtypes;  // the carried state's dtype after each step
  double last_loss = 0;
  std::string rollback_detail;
  std::string events;  // every event, for the failure messages
};

// The loop: the state is carried (detached) from each step into the next, the gradients
// are clipped before the optimizer steps.
LstmRun train_lstm(const std::string& dir, const AmpOptions& amp, bool drift_under_autocast) {
  torch::manual_seed(0);
  Lm model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.5));
  Session session(Options().mode(Mode::Auto).report_dir(dir).run_name("lstm").print_report(false));
  configure_amp(session, amp);
  session.watch(*model);
  const int batch = 4, seq = 8;
  std::tuple<torch::Tensor, torch::Tensor> state{torch::zeros({1, batch, 32}),
                                                 torch::zeros({1, batch, 32})};
  LstmRun run;
  {
    auto e = session.epoch();
    for (int s = 0; s < 30; ++s) {
      // Next token = token + 1: learnable, so the loss falls.
      auto start = torch::randint(0, 32, {batch, 1}, torch::kLong);
      auto tokens = (start + torch::arange(seq + 1, torch::kLong)).remainder(32);
      auto x = tokens.narrow(1, 0, seq), y = tokens.narrow(1, 1, seq);
      auto step = e.step(batch);
      torch::Tensor loss;
      {
        auto f = step.forward();
        auto [logits, next] = model->forward(x, state);
        loss = F::cross_entropy(logits.reshape({-1, 32}).to(torch::kFloat), y.reshape({-1}));
        if (drift_under_autocast && autocast_enabled(c10::DeviceType::CPU)) loss = loss + 5.0;
        state = {std::get<0>(next).detach(), std::get<1>(next).detach()};
      }
      {
        auto b = step.backward();
        optimizer.zero_grad();
        step.scaled(loss).backward();
      }
      {
        auto o = step.optimizer();
        step.unscale(optimizer);
        torch::nn::utils::clip_grad_norm_(model->parameters(), 0.5);
        step.apply(optimizer);
      }
      run.state_dtypes.push_back(std::get<0>(state).scalar_type());
      run.last_loss = loss.item<double>();
    }
  }
  for (const auto& ev : session.report().epochs.at(0).mixed_precision->events) {
    run.kinds.emplace_back(amp_event_kind_name(ev.kind));
    run.events += "step " + std::to_string(ev.step) + ": " + ev.detail + "\n";
    if (ev.kind == AmpEventKind::RolledBack) run.rollback_detail = ev.detail;
  }
  return run;
}

AmpOptions lstm_auto() {
  return AmpOptions().warmup_steps(5).watch_steps(12).rollback_if_slower(false);
}

// Issue 16: fathom enabled bf16, the LSTM's state came out bf16, and the watch's first fp32 step
// fed it to oneDNN's fp32 LSTM: "could not create a primitive descriptor for the LSTM forward
// propagation primitive", and the process ended.
TEST_F(SessionTest, LstmStateFromABf16StepFeedsTheWatchsFp32Steps) {
  LstmRun run;
  ASSERT_NO_THROW(run = train_lstm(dir(), lstm_auto(), false));
  EXPECT_EQ(run.kinds, (std::vector<std::string>{"enabled", "accepted"})) << run.events;
  // Step 5 is the first bf16 step (its state comes out bf16); step 8, the first fp32 probe, runs
  // its LSTM on that state cast up to fp32, and hands on fp32 state.
  EXPECT_EQ(run.state_dtypes.at(5), torch::kBFloat16);
  EXPECT_EQ(run.state_dtypes.at(8), torch::kFloat);
  EXPECT_TRUE(std::isfinite(run.last_loss));
}

TEST_F(SessionTest, LstmStateFromBf16StepsFeedsTheStepsAfterARollback) {
  LstmRun run;
  ASSERT_NO_THROW(run = train_lstm(dir(), lstm_auto(), true));
  EXPECT_EQ(run.kinds, (std::vector<std::string>{"enabled", "rolled_back"})) << run.events;
  EXPECT_NE(run.rollback_detail.find("drifted"), std::string::npos) << run.rollback_detail;
  EXPECT_EQ(run.state_dtypes.back(), torch::kFloat);
  EXPECT_LT(run.last_loss, 5.0);  // fp32 again, without the drift
}

struct FailRun {
  std::vector<int> attempts;
  MixedPrecisionSummary amp;
};

// A linear model trained through guarded_step; `fail` throws from inside the forward phase.
FailRun train_guarded(const std::string& dir, const std::function<bool(int)>& fail) {
  torch::manual_seed(0);
  torch::nn::Linear model(8, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
  Session session(Options().mode(Mode::Auto).report_dir(dir).run_name("g").print_report(false));
  configure_amp(session, AmpOptions().warmup_steps(5).watch_steps(12).rollback_if_slower(false));
  FailRun run;
  const auto x = torch::randn({16, 8}), y = x.sum(1, true);
  {
    auto e = session.epoch();
    for (int s = 0; s < 20; ++s) {
      run.attempts.push_back(guarded_step(
          e, 16,
          [&](StepScope& step) {
            torch::Tensor loss;
            {
              auto f = step.forward();
              if (fail(s)) throw std::runtime_error("no kernel for this dtype");
              loss = F::mse_loss(model(x).to(torch::kFloat), y);
            }
            {
              auto b = step.backward();
              optimizer.zero_grad();
              step.scaled(loss).backward();
            }
            {
              auto o = step.optimizer();
              step.apply(optimizer);
            }
          },
          &optimizer));
    }
  }
  run.amp = *session.report().epochs.at(0).mixed_precision;
  return run;
}

TEST_F(SessionTest, AFailedBf16StepFallsBackToFp32ForGoodAndRunsAgain) {
  bool thrown = false;
  FailRun run;
  ASSERT_NO_THROW(run = train_guarded(dir(), [&](int) {
                    if (thrown || !autocast_enabled(c10::DeviceType::CPU)) return false;
                    return thrown = true;  // the first bf16 step (step 5) fails
                  }));
  EXPECT_EQ(run.attempts.at(5), 2);
  EXPECT_EQ(run.attempts.at(6), 1);
  ASSERT_EQ(run.amp.events.size(), 2u);
  EXPECT_EQ(run.amp.events[1].kind, AmpEventKind::RolledBack);
  const std::string& d = run.amp.events[1].detail;
  EXPECT_NE(d.find("mixed-precision (bf16) step"), std::string::npos) << d;
  EXPECT_NE(d.find("no kernel for this dtype"), std::string::npos) << d;
  EXPECT_NE(d.find("ran the step again in fp32"), std::string::npos) << d;
  EXPECT_EQ(run.amp.state, "rolled_back");
  EXPECT_EQ(run.amp.steps_low_precision, 1);  // the failed attempt only
}

TEST_F(SessionTest, AFailedComparisonStepFallsBackToFp32ForGood) {
  int bf16_steps = 0;
  bool thrown = false;
  FailRun run;
  ASSERT_NO_THROW(
      run = train_guarded(dir(), [&](int) {
        if (autocast_enabled(c10::DeviceType::CPU)) {
          ++bf16_steps;
          return false;
        }
        if (thrown || bf16_steps == 0) return false;
        return thrown = true;  // the first fp32 step after bf16 ones: the watch's probe, step 8
      }));
  EXPECT_EQ(run.attempts.at(8), 2);
  ASSERT_EQ(run.amp.events.size(), 2u);
  EXPECT_EQ(run.amp.events[1].kind, AmpEventKind::RolledBack);
  EXPECT_NE(run.amp.events[1].detail.find("fp32 comparison step"), std::string::npos)
      << run.amp.events[1].detail;
  EXPECT_EQ(run.amp.steps_low_precision, 3);
}

// From the loop's own StepScope fathom cannot run the step again: the error goes on to the
// loop, and mixed precision is off for good with the reason in the report.
TEST_F(SessionTest, AFailedBf16StepOutsideGuardedStepIsRethrownAndTurnsItOff) {
  torch::nn::Linear model(8, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
  Session session(Options().mode(Mode::Auto).report_dir(dir()).print_report(false));
  configure_amp(session, AmpOptions().warmup_steps(5).watch_steps(12).rollback_if_slower(false));
  const auto x = torch::randn({16, 8}), y = x.sum(1, true);
  int thrown = 0, bf16_after = 0;
  {
    auto e = session.epoch();
    for (int s = 0; s < 12; ++s) {
      try {
        auto step = e.step(16);
        torch::Tensor loss;
        {
          auto f = step.forward();
          if (autocast_enabled(c10::DeviceType::CPU)) {
            if (thrown) ++bf16_after;
            if (!thrown++) throw std::runtime_error("no kernel for this dtype");
          }
          loss = F::mse_loss(model(x), y);
        }
        optimizer.zero_grad();
        step.scaled(loss).backward();
        step.apply(optimizer);
      } catch (const std::runtime_error&) {
      }
    }
  }
  EXPECT_EQ(thrown, 1);
  EXPECT_EQ(bf16_after, 0);
  const MixedPrecisionSummary& m = *session.report().epochs.at(0).mixed_precision;
  ASSERT_EQ(m.events.size(), 2u);
  EXPECT_EQ(m.events[1].kind, AmpEventKind::RolledBack);
  EXPECT_NE(m.events[1].detail.find("off for good"), std::string::npos) << m.events[1].detail;
  EXPECT_EQ(m.state, "rolled_back");
}

TEST_F(SessionTest, AnErrorInAnFp32WarmupStepIsTheLoopsAndIsRethrown) {
  EXPECT_THROW(train_guarded(dir(), [](int s) { return s == 2; }), std::runtime_error);
}

}  // namespace
}  // namespace fathom
