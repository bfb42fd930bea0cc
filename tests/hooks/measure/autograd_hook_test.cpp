// The autograd-engine hook (saved_tensor_meter.h) goes in only when a profiled step runs a chain
// through fathom, and never when Options::autograd_hook(false) says so. The hook is process-wide
// and cannot be taken back: ctest runs each test in its own process, and a test run after another
// that installed it skips.
#include <fathom/fathom.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/engine.h>

#include <algorithm>

#include "session_fixture.h"

namespace fathom {
namespace {

using test::SessionTest;

bool base_engine_is_default() {
  return &torch::autograd::Engine::get_default_engine() ==
         &torch::autograd::Engine::get_base_engine();
}

// One epoch of `steps` steps; through_fathom: the model runs as a chain fathom measures.
void train(Session& session, torch::nn::Sequential& model, int steps, bool through_fathom) {
  auto e = session.epoch();
  for (int s = 0; s < steps; ++s) {
    auto step = e.step(4);
    at::Tensor loss;
    {
      auto f = step.forward();
      const at::Tensor x = torch::randn({4, 8});
      loss = (through_fathom ? fathom::forward(model, x) : model->forward(x)).pow(2).mean();
    }
    auto b = step.backward();
    loss.backward();
  }
}

const Unmeasured* not_measured(const Session& session, const std::string& what) {
  const auto& all = session.report().environment.not_measured;
  auto it =
      std::find_if(all.begin(), all.end(), [&](const Unmeasured& u) { return u.what == what; });
  return it == all.end() ? nullptr : &*it;
}

TEST_F(SessionTest, TheAutogradHookWaitsForAChainInAProfiledStep) {
  if (!base_engine_is_default()) GTEST_SKIP() << "the hook is already in this process";
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Observe));
  auto model = tiny_model();
  session.watch(*model);
  train(session, model, 4, /*through_fathom=*/false);
  EXPECT_TRUE(base_engine_is_default()) << "a session that runs no chain replaced the engine";
  train(session, model, 1, /*through_fathom=*/true);
  EXPECT_FALSE(base_engine_is_default());
  const EpochSummary& e = session.report().epochs.at(1);
  ASSERT_TRUE(e.modules.has_value());
  EXPECT_EQ(e.modules->profiled_steps, 1);
  ASSERT_EQ(e.modules->modules.size(), 3u);
  EXPECT_GT(e.modules->modules[0].input_saved_bytes, 0);
  ASSERT_TRUE(e.footprint.has_value());
  EXPECT_GT(e.footprint->activation_bytes, 0);
  EXPECT_EQ(not_measured(session, "activation bytes per module"), nullptr);
}

TEST_F(SessionTest, TheAutogradHookTurnedOffLeavesTheEngineAndTheReportSaysSo) {
  if (!base_engine_is_default()) GTEST_SKIP() << "the hook is already in this process";
  Session session(
      Options().report_dir(dir()).print_report(false).mode(Mode::Observe).autograd_hook(false));
  auto model = tiny_model();
  session.watch(*model);
  train(session, model, 4, /*through_fathom=*/true);
  EXPECT_TRUE(base_engine_is_default());
  const Unmeasured* u = not_measured(session, "activation bytes per module");
  ASSERT_NE(u, nullptr);
  EXPECT_NE(u->why.find("autograd_hook(false)"), std::string::npos) << u->why;
  const EpochSummary& e = session.report().epochs.at(0);
  ASSERT_TRUE(e.modules.has_value());  // the chain's blocks are named, not measured
  EXPECT_EQ(e.modules->profiled_steps, 0);
  EXPECT_EQ(e.modules->source.rfind("not measured", 0), 0u) << e.modules->source;
  for (const ModuleMeasurement& m : e.modules->modules) EXPECT_EQ(m.calls, 0) << m.name;
  ASSERT_TRUE(e.footprint.has_value());
  // Not measured, with the reason: not a 0 the hardware fit would size configurations from.
  EXPECT_FALSE(e.footprint->activation_bytes.has_value());
  EXPECT_NE(e.footprint->activation_why.find("autograd_hook(false)"), std::string::npos)
      << e.footprint->activation_why;
}

TEST_F(SessionTest, TheAutogradHookCanBeTurnedOffFromTheEnvironment) {
  ASSERT_EQ(::setenv("FATHOM_AUTOGRAD_HOOK", "off", 1), 0);
  Session session(Options().report_dir(dir()).print_report(false));
  ::unsetenv("FATHOM_AUTOGRAD_HOOK");
  EXPECT_FALSE(session.options().autograd_hook());
  EXPECT_NE(not_measured(session, "activation bytes per module"), nullptr);
}

}  // namespace
}  // namespace fathom
