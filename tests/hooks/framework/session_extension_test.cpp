#include <fathom/fathom.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "framework/session_access.h"
#include "framework/session_state.h"
#include "measure/cuda_allocator_access.h"
#include "measure/footprint_extension.h"
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
  detail::SessionState* state = detail::SessionAccess::state(session);
  Recording* recording = state->add_extension(std::make_unique<Recording>(&log));
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
  EXPECT_NE(recording, nullptr);
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
  auto* probe =
      detail::SessionAccess::state(session)->add_extension(std::make_unique<FootprintProbe>());
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

// Logs its lifecycle with its name, to see the order extensions are called in.
class Named : public detail::SessionExtension {
 public:
  Named(std::string name, std::vector<std::string>* log) : name_(std::move(name)), log_(log) {}
  void on_epoch_begin(std::int64_t) noexcept override { add("epoch"); }
  void on_step_begin(std::int64_t) noexcept override { add("step"); }
  void on_phase_begin(Phase p) noexcept override { add(std::string(phase_name(p))); }
  void on_phase_end(Phase p, bool) noexcept override {
    std::string entry = "/";  // appended: GCC 12 warns falsely on "/" + ...
    entry += phase_name(p);
    add(entry);
  }
  void on_step_end(std::int64_t, bool) noexcept override { add("/step"); }
  void on_epoch_measured(EpochSummary&, Environment&) noexcept override { add("measured"); }
  void on_epoch_end(EpochSummary&, Environment&) noexcept override { add("/epoch"); }

 private:
  void add(const std::string& what) { log_->push_back(name_ + " " + what); }
  std::string name_;
  std::vector<std::string>* log_;
};

// Phases and steps end last in, first out; the epoch's report is built in the order added.
TEST_F(SessionTest, EndCallbacksRunInTheReverseOrderOfTheBeginCallbacks) {
  Session session(Options().report_dir(dir()).print_report(false));
  std::vector<std::string> log;
  detail::SessionState* state = detail::SessionAccess::state(session);
  state->add_extension(std::make_unique<Named>("a", &log));
  state->add_extension(std::make_unique<Named>("b", &log));
  {
    auto e = session.epoch();
    auto step = e.step(1);
    auto f = step.forward();
  }
  EXPECT_EQ(log,
            (std::vector<std::string>{"a epoch", "b epoch", "a step", "b step", "a forward",
                                      "b forward", "b /forward", "a /forward", "b /step", "a /step",
                                      "a measured", "b measured", "a /epoch", "b /epoch"}));
}

// Contributes one part of the footprint, as the AMP and checkpoint extensions do.
class Part : public detail::SessionExtension {
 public:
  explicit Part(bool activations) : activations_(activations) {}
  void on_footprint(detail::FootprintParts& parts, Environment&) noexcept override {
    if (activations_)
      parts.activations = detail::ActivationBytes{4096, 3, true};
    else
      parts.mixed_precision = true;
  }

 private:
  bool activations_;
};

TEST_F(SessionTest, TheFootprintIsTheSameWhateverOrderItsPartsComeIn) {
  fs::make_directories(dir());
  auto model = tiny_model();
  std::vector<std::optional<MemoryFootprint>> seen;
  std::vector<int> order{0, 1, 2};  // the model's bytes, the activations, mixed precision
  do {
    detail::SessionState state(Options().report_dir(dir()).print_report(false), std::nullopt,
                               detail::make_allocator_access(std::nullopt));
    for (int i : order) {
      if (i == 0)
        state.add_extension(std::make_unique<detail::FootprintExtension>())
            ->watch(model.ptr().get(), "Sequential", model->parameters());
      else
        state.add_extension(std::make_unique<Part>(i == 1));
    }
    state.begin_epoch();
    state.end_epoch(/*by_exception=*/false);
    seen.push_back(state.report().epochs.at(0).footprint);
  } while (std::next_permutation(order.begin(), order.end()));
  ASSERT_EQ(seen.size(), 6u);
  for (const std::optional<MemoryFootprint>& f : seen) {
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->parameter_count, 8 * 16 + 16 + 16 * 4 + 4);
    EXPECT_EQ(f->parameter_bytes, f->parameter_count * 4);
    EXPECT_EQ(f->activation_bytes, 4096);
    EXPECT_EQ(f->checkpointable_blocks, 3);
    EXPECT_TRUE(f->checkpointing);
    EXPECT_TRUE(f->mixed_precision);
  }
}

}  // namespace
}  // namespace fathom
