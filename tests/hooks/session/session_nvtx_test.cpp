// Ranges as Nsight Systems would see them, recorded by the test NVTX tool (NVTX_INJECTION64_PATH).
#include <fathom/fathom.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "collect/nvtx.h"
#include "nvtx_tree.h"
#include "scoped_env.h"
#include "session_fixture.h"

namespace fathom {
namespace {

using test::NvtxRange;
using test::SessionTest;

const NvtxRange* find_range(const test::NvtxTree& t, const std::string& message) {
  auto it = std::find_if(t.ranges.begin(), t.ranges.end(),
                         [&](const NvtxRange& r) { return r.message == message; });
  return it == t.ranges.end() ? nullptr : &*it;
}

std::size_t count_prefix(const test::NvtxTree& t, const std::string& prefix) {
  return std::count_if(t.ranges.begin(), t.ranges.end(),
                       [&](const NvtxRange& r) { return r.message.rfind(prefix, 0) == 0; });
}

class SessionNvtxTest : public SessionTest {
 protected:
  void SetUp() override {
    SessionTest::SetUp();
    ASSERT_NE(std::getenv("NVTX_INJECTION64_PATH"), nullptr) << "run through ctest";
    test::clear_recorded_events();
  }
  test::NvtxTree tree() { return test::build_tree(test::recorded_events(), "fathom"); }
};

TEST_F(SessionNvtxTest, EpochStepPhaseNestingAndModuleRanges) {
  Session session(Options().report_dir(dir()).print_report(false).nvtx(NvtxLevel::Modules));
  auto model = tiny_model();
  session.watch(*model);
  {
    auto e = session.epoch();
    for (int i = 0; i < 2; ++i) {
      auto step = e.step(4);
      torch::Tensor loss;
      {
        auto f = step.forward();
        loss = fathom::forward(model, torch::randn({4, 8}, torch::requires_grad())).sum();
      }
      {
        auto b = step.backward();
        loss.backward();
      }
      { auto o = step.optimizer(); }
    }
  }
  auto t = tree();
  EXPECT_TRUE(t.errors.empty()) << t.errors.front();
  EXPECT_EQ(count_prefix(t, "epoch"), 1u);
  EXPECT_EQ(count_prefix(t, "step"), 2u);
  const NvtxRange* fwd = find_range(t, "forward");
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->category, static_cast<std::uint32_t>(nvtx::Kind::Phase));
  ASSERT_EQ(fwd->ancestors.size(), 2u);
  EXPECT_EQ(fwd->ancestors[0], "epoch 0");
  EXPECT_EQ(fwd->ancestors[1], "step 0");
  for (const char* name : {"backward", "optimizer"})
    EXPECT_NE(find_range(t, name), nullptr) << name;
  // Module ranges carry the watched names and sit inside forward.
  const NvtxRange* linear = find_range(t, "0 (Linear)");
  ASSERT_NE(linear, nullptr);
  EXPECT_EQ(linear->category, static_cast<std::uint32_t>(nvtx::Kind::Module));
  EXPECT_EQ(linear->ancestors.back(), "forward");
  EXPECT_NE(find_range(t, "1 (ReLU)"), nullptr);
  EXPECT_NE(find_range(t, "2 (Linear)"), nullptr);
  // The loader's time between steps is a process range (it spans two steps' scopes).
  EXPECT_EQ(
      std::count_if(t.ranges.begin(), t.ranges.end(),
                    [](const NvtxRange& r) { return r.message == "data" && r.process_range; }),
      3);
}

TEST_F(SessionNvtxTest, ExceptionInForwardStillBalancesEveryRange) {
  Session session(Options().report_dir(dir()).print_report(false));
  auto model = tiny_model();
  session.watch(*model);
  try {
    auto e = session.epoch();
    auto step = e.step(4);
    auto f = step.forward();
    test::ScopedEnv nothing("FATHOM_UNUSED_IN_TEST", nullptr);
    torch::nn::Sequential broken(torch::nn::Linear(3, 3));
    (void)fathom::forward(broken, torch::randn({4, 8}));  // shape mismatch: throws
    FAIL() << "expected a shape error";
  } catch (const c10::Error&) {
  }
  auto t = tree();
  EXPECT_TRUE(t.errors.empty()) << t.errors.front();
  EXPECT_NE(find_range(t, "forward"), nullptr);
}

TEST_F(SessionNvtxTest, PhasesLevelHasNoModuleRanges) {
  Session session(Options().report_dir(dir()).print_report(false).nvtx(NvtxLevel::Phases));
  auto model = tiny_model();
  session.watch(*model);
  {
    auto e = session.epoch();
    auto step = e.step(4);
    auto f = step.forward();
    (void)fathom::forward(model, torch::randn({4, 8}));
  }
  auto t = tree();
  EXPECT_NE(find_range(t, "forward"), nullptr);
  EXPECT_EQ(find_range(t, "0 (Linear)"), nullptr);
}

// One epoch of one step: a forward through model's own forward (no module ranges), a backward.
void one_epoch_of_one_step(Session& session, torch::nn::Sequential& model) {
  auto e = session.epoch();
  auto step = e.step(4);
  torch::Tensor loss;
  {
    auto f = step.forward();
    loss = model->forward(torch::randn({4, 8})).sum();
  }
  auto b = step.backward();
  loss.backward();
}

TEST_F(SessionNvtxTest, OpRangesWithSequenceNumbersAndShapes) {
  Session session(
      Options().report_dir(dir()).print_report(false).nvtx(NvtxLevel::Ops).record_shapes(true));
  auto model = tiny_model();
  one_epoch_of_one_step(session, model);
  auto t = tree();
  EXPECT_TRUE(t.errors.empty()) << t.errors.front();
  auto addmm = std::find_if(t.ranges.begin(), t.ranges.end(), [](const NvtxRange& r) {
    return r.message.rfind("aten::addmm, seq = ", 0) == 0;
  });
  ASSERT_NE(addmm, t.ranges.end());
  EXPECT_EQ(addmm->category, static_cast<std::uint32_t>(nvtx::Kind::Op));
  EXPECT_NE(addmm->message.find("[4, 8]"), std::string::npos) << addmm->message;
  // Backward ops carry the sequence number of the forward op they differentiate.
  auto backward_op = std::find_if(t.ranges.begin(), t.ranges.end(), [](const NvtxRange& r) {
    return r.message.find("AddmmBackward") != std::string::npos;
  });
  ASSERT_NE(backward_op, t.ranges.end());
  EXPECT_NE(backward_op->message.find("seq = "), std::string::npos);
}

// Without shapes an op's range is its registered name, and the sequence number travels as the
// range's payload: no text is formatted per op, and the backward op still names its forward op.
TEST_F(SessionNvtxTest, OpRangesAreRegisteredNamesWithTheSequenceNumberAsPayload) {
  Session session(Options().report_dir(dir()).print_report(false).nvtx(NvtxLevel::Ops));
  auto model = tiny_model();
  for (int i = 0; i < 2; ++i)  // the second step finds every name already registered
    one_epoch_of_one_step(session, model);
  auto t = tree();
  EXPECT_TRUE(t.errors.empty()) << t.errors.front();
  std::vector<const NvtxRange*> addmm, backward;
  for (const NvtxRange& r : t.ranges) {
    if (r.message == "aten::addmm") addmm.push_back(&r);
    if (r.message == "AddmmBackward0") backward.push_back(&r);
  }
  ASSERT_EQ(addmm.size(), 4u) << "two Linear layers, two steps";
  ASSERT_EQ(backward.size(), 4u);
  std::set<std::int64_t> forward_seqs, backward_seqs;
  for (const NvtxRange* r : addmm) {
    EXPECT_TRUE(r->registered);
    EXPECT_EQ(r->category, static_cast<std::uint32_t>(nvtx::Kind::Op));
    ASSERT_TRUE(r->payload.has_value());
    forward_seqs.insert(*r->payload);
  }
  EXPECT_EQ(forward_seqs.size(), 4u) << "each forward op has its own number";
  for (const NvtxRange* r : backward) {
    EXPECT_TRUE(r->registered);
    ASSERT_TRUE(r->payload.has_value());
    backward_seqs.insert(*r->payload);
  }
  EXPECT_EQ(backward_seqs, forward_seqs) << "each backward op names its forward op";
}

TEST_F(SessionNvtxTest, OpRangesStopWhenTheSessionEnds) {
  { Session session(Options().report_dir(dir()).print_report(false).nvtx(NvtxLevel::Ops)); }
  test::clear_recorded_events();
  (void)torch::mm(torch::randn({2, 2}), torch::randn({2, 2}));
  EXPECT_TRUE(tree().ranges.empty());
}

// ctest runs this twice: with the recorder attached, and as hooks.op_callback_without_a_tool
// without it, where nothing would receive op ranges and the callback must not be registered.
TEST_F(SessionTest, OpCallbackIsRegisteredOnlyWhenAToolListens) {
  const bool tool = std::getenv("NVTX_INJECTION64_PATH") != nullptr;
  ASSERT_FALSE(at::hasGlobalCallbacks()) << "another test left a RecordFunction callback";
  Session session(Options().report_dir(dir()).print_report(false).nvtx(NvtxLevel::Ops));
  EXPECT_EQ(at::hasGlobalCallbacks(), tool);
  {
    auto e = session.epoch();
    auto step = e.step(1);
    auto f = step.forward();
    (void)torch::mm(torch::randn({2, 2}), torch::randn({2, 2}));
  }
  bool noted = false;
  for (const auto& u : session.report().environment.not_measured)
    noted = noted || u.what == "ATen op ranges";
  EXPECT_EQ(noted, !tool);
}

TEST_F(SessionNvtxTest, FindingsAreMarkedOnTheTimeline) {
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Suggest));
  {
    auto e = session.epoch();
    for (int i = 0; i < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a slow loader
      auto step = e.step(1);
      auto f = step.forward();
    }
  }
  ASSERT_FALSE(session.report().epochs.at(0).findings.empty());
  auto events = test::recorded_events();
  EXPECT_TRUE(std::any_of(events.begin(), events.end(), [](const test::NvtxEvent& ev) {
    return ev.kind == 'M' && ev.domain == "fathom" &&
           ev.category == static_cast<std::uint32_t>(nvtx::Kind::Finding) &&
           ev.message == "fathom: Training waits on data loading";
  }));
}

// A slowdown injected from step 300 in forward: marked on the timeline during the epoch, at the
// first check that sees it, and a finding at the epoch's end that names the step and the phase.
TEST_F(SessionNvtxTest, AnInjectedSlowdownIsMarkedDuringTheEpoch) {
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Suggest));
  {
    auto e = session.epoch();
    for (int i = 0; i < 520; ++i) {
      auto step = e.step(1);
      auto f = step.forward();
      std::this_thread::sleep_for(std::chrono::microseconds(i < 300 ? 1000 : 3000));
    }
  }
  const EpochSummary& ep = session.report().epochs.at(0);
  ASSERT_TRUE(ep.series && ep.series->change);
  EXPECT_NEAR(static_cast<double>(ep.series->change->step), 300, 4);
  EXPECT_EQ(ep.series->change->phase, "forward");
  EXPECT_TRUE(std::any_of(ep.findings.begin(), ep.findings.end(),
                          [](const Finding& f) { return f.id == "steps.slowdown"; }));
  auto events = test::recorded_events();
  EXPECT_TRUE(std::any_of(events.begin(), events.end(), [](const test::NvtxEvent& ev) {
    return ev.kind == 'M' && ev.domain == "fathom" &&
           ev.category == static_cast<std::uint32_t>(nvtx::Kind::Finding) &&
           ev.message.rfind("fathom: step time rose", 0) == 0 &&
           ev.message.find("the phase that grew: forward") != std::string::npos;
  })) << "marked when a check first saw it, before the epoch ended";
}

// A tensor kept per step (1 MiB): resident memory creeps, and the finding gives the rate.
TEST_F(SessionNvtxTest, ATensorKeptPerStepIsFoundAsMemoryCreep) {
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Suggest));
  std::vector<torch::Tensor> kept;
  {
    auto e = session.epoch();
    for (int i = 0; i < 300; ++i) {
      auto step = e.step(1);
      auto f = step.forward();
      kept.push_back(torch::ones({1 << 18}));  // 1 MiB, touched
    }
  }
  const EpochSummary& ep = session.report().epochs.at(0);
  ASSERT_TRUE(ep.series && ep.series->creep);
  EXPECT_NEAR(ep.series->creep->bytes_per_step, 1 << 20, 0.15 * (1 << 20));
  EXPECT_TRUE(std::any_of(ep.findings.begin(), ep.findings.end(),
                          [](const Finding& f) { return f.id == "memory.creep"; }));
}

TEST_F(SessionNvtxTest, ModeOffEmitsNoRanges) {
  test::ScopedEnv off("FATHOM_MODE", "off");
  Session session(Options().report_dir(dir()).nvtx(NvtxLevel::Ops));
  auto model = tiny_model();
  session.watch(*model);
  {
    auto e = session.epoch();
    auto step = e.step(4);
    auto f = step.forward();
    (void)fathom::forward(model, torch::randn({4, 8}));
  }
  EXPECT_TRUE(test::recorded_events().empty());
}

}  // namespace
}  // namespace fathom
