// The out-of-memory guard, on CPU: the error is injected from inside the step, as the CUDA caching
// allocator raises it (c10::OutOfMemoryError).
#include <c10/util/Exception.h>
#include <fathom/checkpoint_planner.h>
#include <fathom/fathom.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "session_fixture.h"

namespace fathom {
namespace {

using test::SessionTest;

[[noreturn]] void out_of_memory() {
  TORCH_CHECK_WITH(OutOfMemoryError, false,
                   "CUDA out of memory. Tried to allocate 2.00 GiB (injected by the test)");
  std::abort();  // not reached
}

// Throws out of memory in its forward while armed: a block that runs out of memory.
struct GreedyImpl : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x) {
    if (armed) {
      armed = false;
      out_of_memory();
    }
    return x * 2;
  }
  bool armed = false;
};
TORCH_MODULE(Greedy);

struct Loop {
  torch::nn::Sequential model;
  Greedy greedy;
  torch::optim::SGD optimizer;
  int optimizer_steps = 0;
  Loop() : model(make()), greedy(model->ptr<GreedyImpl>(3)), optimizer(model->parameters(), 0.1) {}
  static torch::nn::Sequential make() {
    torch::manual_seed(21);
    using namespace torch::nn;
    return Sequential(Linear(32, 64), ReLU(), Linear(64, 64), Greedy(), Tanh(), Linear(64, 64),
                      ReLU(), Linear(64, 4));
  }
  // The step body; fail_in: the phase whose first run throws out of memory.
  std::function<void(StepScope&)> body(std::optional<Phase> fail_in) {
    return [this, fail_in, armed = true](StepScope& step) mutable {
      const at::Tensor x = torch::randn({16, 32});
      at::Tensor loss;
      {
        auto f = step.forward();
        if (fail_in == Phase::Forward && armed) {
          armed = false;
          greedy->armed = true;
        }
        loss = fathom::forward(model, x).pow(2).mean();
      }
      {
        auto b = step.backward();
        optimizer.zero_grad();
        if (fail_in == Phase::Backward && armed) {
          armed = false;
          out_of_memory();
        }
        loss.backward();
      }
      {
        auto o = step.optimizer();
        optimizer.step();
        ++optimizer_steps;
        if (fail_in == Phase::Optimizer && armed) {
          armed = false;
          out_of_memory();
        }
      }
    };
  }
};

const ModuleReport& modules_of(const Session& session) {
  const auto& e = session.report().epochs.at(0);
  EXPECT_TRUE(e.modules.has_value());
  return *e.modules;
}

TEST_F(SessionTest, AutoRecoversFromOutOfMemoryInBackwardByCheckpointing) {
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Auto));
  Loop loop;
  session.watch(*loop.model);
  {
    auto e = session.epoch();
    EXPECT_EQ(guarded_step(e, 16, loop.body(Phase::Backward), &loop.optimizer), 2);
    EXPECT_EQ(guarded_step(e, 16, loop.body(std::nullopt), &loop.optimizer), 1);
  }
  EXPECT_EQ(loop.optimizer_steps, 2);  // once per guarded step: never twice
  const auto& e = session.report().epochs.at(0);
  EXPECT_EQ(e.steps, 3);
  EXPECT_EQ(e.failed_steps, 1);
  const ModuleReport& m = modules_of(session);
  ASSERT_EQ(m.out_of_memory.size(), 1u);
  const OutOfMemoryEvent& o = m.out_of_memory[0];
  EXPECT_EQ(o.step, 0);
  EXPECT_EQ(o.phase, Phase::Backward);
  EXPECT_NE(o.error.find("CUDA out of memory"), std::string::npos) << o.error;
  EXPECT_TRUE(o.retried);
  EXPECT_TRUE(o.recovered);
  EXPECT_NE(o.action.find("checkpointed"), std::string::npos) << o.action;
  EXPECT_NE(o.action.find("the gradients"), std::string::npos) << o.action;
  EXPECT_FALSE(o.peak_allocated_bytes.has_value());  // CPU: no allocator statistics
  ASSERT_EQ(m.plans.size(), 1u);
  EXPECT_TRUE(m.plans[0].applied);
  // Half the peak, or the least any plan needs when half is out of reach.
  EXPECT_LE(m.plans[0].predicted_peak_bytes, std::max(m.plans[0].unconstrained_peak_bytes / 2,
                                                      m.plans[0].min_feasible_budget_bytes));
  EXPECT_LT(m.plans[0].predicted_peak_bytes, m.plans[0].unconstrained_peak_bytes);
}

TEST_F(SessionTest, OutOfMemoryInABlockNamesTheBlock) {
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Auto));
  Loop loop;
  session.watch(*loop.model);
  {
    auto e = session.epoch();
    // The chain was never measured: fathom falls back to sqrt(n) segments.
    EXPECT_EQ(guarded_step(e, 16, loop.body(Phase::Forward), &loop.optimizer), 2);
  }
  const ModuleReport& m = modules_of(session);
  ASSERT_EQ(m.out_of_memory.size(), 1u);
  EXPECT_EQ(m.out_of_memory[0].phase, Phase::Forward);
  EXPECT_EQ(m.out_of_memory[0].module, "3 (Greedy)");
  EXPECT_TRUE(m.out_of_memory[0].recovered);
  ASSERT_EQ(m.plans.size(), 1u);
  EXPECT_EQ(m.plans[0].segments, sqrt_segments(8));
  EXPECT_EQ(loop.optimizer_steps, 1);
}

TEST_F(SessionTest, OutOfMemoryAfterTheOptimizerBeganIsNotRetried) {
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Auto));
  Loop loop;
  session.watch(*loop.model);
  try {
    auto e = session.epoch();
    (void)guarded_step(e, 16, loop.body(Phase::Optimizer), &loop.optimizer);
    FAIL() << "expected the error to be rethrown";
  } catch (const c10::OutOfMemoryError&) {
  }
  EXPECT_EQ(loop.optimizer_steps, 1);
  const ModuleReport& m = modules_of(session);
  ASSERT_EQ(m.out_of_memory.size(), 1u);
  EXPECT_EQ(m.out_of_memory[0].phase, Phase::Optimizer);
  EXPECT_FALSE(m.out_of_memory[0].retried);
  EXPECT_NE(m.out_of_memory[0].action.find("apply it twice"), std::string::npos);
  // The diagnosis is in the report written when the epoch ended by the exception.
  const std::string text = format_json_report(read_report_file(session.report_path()));
  EXPECT_NE(text.find("\"out_of_memory\""), std::string::npos);
  EXPECT_NE(text.find("apply it twice"), std::string::npos);
}

TEST_F(SessionTest, SuggestModeRethrowsAfterTheDiagnosis) {
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Suggest));
  Loop loop;
  session.watch(*loop.model);
  {
    auto e = session.epoch();
    EXPECT_THROW((void)guarded_step(e, 16, loop.body(Phase::Backward), &loop.optimizer),
                 c10::OutOfMemoryError);
  }
  EXPECT_EQ(loop.optimizer_steps, 0);
  const ModuleReport& m = modules_of(session);
  ASSERT_EQ(m.out_of_memory.size(), 1u);
  EXPECT_FALSE(m.out_of_memory[0].retried);
  EXPECT_NE(m.out_of_memory[0].action.find("Auto mode"), std::string::npos);
}

TEST_F(SessionTest, OtherErrorsPassThroughUntouched) {
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Auto));
  auto e = session.epoch();
  int runs = 0;
  EXPECT_THROW((void)guarded_step(e, 1,
                                  [&](StepScope&) {
                                    ++runs;
                                    throw std::runtime_error("bug");
                                  }),
               std::runtime_error);
  EXPECT_EQ(runs, 1);
}

TEST_F(SessionTest, TheGuardRecordsIntoTheSessionOfItsEpochNotTheNewestOne) {
  Session first(Options().report_dir(dir()).run_name("first").print_report(false));
  Loop loop;
  first.watch(*loop.model);
  // A second session, newer and with an epoch open too, must not take the first one's step over.
  Session second(Options().report_dir(dir()).run_name("second").print_report(false));
  {
    auto e1 = first.epoch();
    auto e2 = second.epoch();
    EXPECT_THROW((void)guarded_step(e1, 16, loop.body(Phase::Backward), &loop.optimizer),
                 c10::OutOfMemoryError);
  }
  const ModuleReport& m = modules_of(first);
  ASSERT_EQ(m.out_of_memory.size(), 1u);
  EXPECT_EQ(m.out_of_memory[0].module, "");  // backward: no block runs
  EXPECT_EQ(m.out_of_memory[0].phase, Phase::Backward);
  ASSERT_EQ(m.modules.size(), 8u);  // the chain ran in the first session's step
  ASSERT_EQ(second.report().epochs.size(), 1u);
  EXPECT_FALSE(second.report().epochs[0].modules.has_value());
  EXPECT_EQ(second.report().epochs[0].steps, 0);
}

}  // namespace
}  // namespace fathom
