#include <fathom/fathom.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "session/session_state.h"
#include "session_fixture.h"

namespace fathom {
namespace {

using test::SessionTest;

class Recording : public detail::SessionExtension {
 public:
  explicit Recording(std::vector<std::string>* log) : log_(log) {}
  void on_epoch_begin(std::int64_t e) noexcept override {
    log_->push_back("epoch " + std::to_string(e));
  }
  void on_step_begin(std::int64_t s) noexcept override {
    log_->push_back("step " + std::to_string(s));
  }
  void on_phase_begin(Phase p) noexcept override { log_->push_back(std::string(phase_name(p))); }
  void on_phase_end(Phase p, bool aborted) noexcept override {
    std::string entry = "/";  // appended, not "/" + ...: GCC 12 warns falsely on that form
    entry += phase_name(p);
    if (aborted) entry += "!";
    log_->push_back(std::move(entry));
  }
  void on_step_end(std::int64_t, bool failed) noexcept override {
    log_->push_back(failed ? "/step!" : "/step");
  }
  void on_epoch_measured(EpochSummary& e, Environment&) noexcept override {
    // Measurements come before the advisor: no finding exists yet.
    log_->push_back(e.findings.empty() ? "measured" : "measured after findings?");
  }
  void on_epoch_end(EpochSummary& e, Environment& env) noexcept override {
    log_->push_back("/epoch");
    e.findings.push_back(Finding{"test.extension", Severity::Info, "added by an extension"});
    env.not_measured.push_back({"test", "extension"});
  }

 private:
  std::vector<std::string>* log_;
};

TEST_F(SessionTest, ExtensionsSeeTheLifecycleAndAddToTheReport) {
  Session session(Options().report_dir(dir()).print_report(false));
  std::vector<std::string> log;
  session.internal_state()->add_extension(std::make_unique<Recording>(&log));
  try {
    auto e = session.epoch();
    auto step = e.step(1);
    { auto f = step.forward(); }
    auto b = step.backward();
    throw std::runtime_error("x");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(log, (std::vector<std::string>{"epoch 0", "step 0", "forward", "/forward", "backward",
                                           "/backward!", "/step!", "measured", "/epoch"}));
  ASSERT_EQ(session.report().epochs.size(), 1u);
  EXPECT_EQ(session.report().epochs[0].findings.back().id, "test.extension");
  EXPECT_EQ(session.report().environment.not_measured.back().why, "extension");
  EXPECT_NE(session.internal_state()->extension<Recording>(), nullptr);
}

// What the advisor will read, captured at the last extension's on_epoch_measured.
class FootprintProbe : public detail::SessionExtension {
 public:
  void on_epoch_measured(EpochSummary& e, Environment&) noexcept override {
    if (e.footprint) seen = *e.footprint;
  }
  std::optional<MemoryFootprint> seen;
};

TEST_F(SessionTest, TheAdvisorSeesTheFootprintWithMixedPrecisionAndActivations) {
  torch::manual_seed(0);
  auto model =
      torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::ReLU(), torch::nn::Linear(16, 4));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  Session session(Options().report_dir(dir()).print_report(false));
  configure_amp(session, AmpOptions().when(AmpOptions::When::Always));  // bf16 on CPU
  session.watch(*model);
  session.watch(optimizer);
  session.internal_state()->add_extension(std::make_unique<FootprintProbe>());
  auto* probe = session.internal_state()->extension<FootprintProbe>();
  ASSERT_NE(probe, nullptr);
  {
    auto e = session.epoch();
    for (int s = 0; s < 3; ++s) {
      auto step = e.step(4);
      torch::Tensor loss;
      {
        auto f = step.forward();
        loss = fathom::forward(model, torch::randn({4, 8})).to(torch::kFloat).pow(2).mean();
      }
      {
        auto b = step.backward();
        optimizer.zero_grad();
        step.scaled(loss).backward();
      }
      auto o = step.optimizer();
      step.apply(optimizer);
    }
  }
  ASSERT_TRUE(probe->seen.has_value());
  EXPECT_TRUE(probe->seen->mixed_precision);    // set before the advisor, not after it
  EXPECT_GT(probe->seen->activation_bytes, 0);  // the checkpoint extension's measurement
  EXPECT_TRUE(probe->seen->checkpointable_blocks.has_value());
}

}  // namespace
}  // namespace fathom
