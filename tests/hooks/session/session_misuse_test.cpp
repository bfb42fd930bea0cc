// C++ misuse that Python refuses by itself (issue 25): a scope that outlives its Session, an epoch
// inside an epoch, a step inside a step, a sample count no batch has, AMP options no step could
// use, and a report folder whose name holds an escape sequence. Each is an error or a warned
// no-op; none crashes, drops an epoch silently or makes a finding of its own.
#include <fathom/fathom.h>
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "framework/session_state.h"
#include "session_fixture.h"

namespace fathom {
namespace {

using test::SessionTest;

struct Warnings {
  std::vector<std::string> lines;
  WarningHandler handler() {
    return [this](std::string_view m) { lines.emplace_back(m); };
  }
  bool said(std::string_view part) const {
    for (const std::string& l : lines)
      if (l.find(part) != std::string::npos) return true;
    return false;
  }
  std::string all() const {
    std::string s;
    for (const std::string& l : lines) s += l + "\n";
    return s.empty() ? "(no warning)" : s;
  }
};

// One step of a tiny model, every phase in braces.
void one_step(StepScope& step, torch::nn::Sequential& model) {
  auto x = step.to_device(torch::randn({4, 8}), torch::kCPU);
  torch::Tensor loss;
  {
    auto f = step.forward();
    loss = fathom::forward(model, x).sum();
  }
  {
    auto b = step.backward();
    loss.backward();
  }
}

// Was a use-after-free (SIGSEGV, or garbage written through freed memory): the scopes kept a raw
// pointer to the state the Session's end freed. The warning is what fails on the code before.
TEST_F(SessionTest, ScopesThatOutliveTheirSessionEndAsNoOpsWithAWarning) {
  Warnings w;
  ASSERT_EQ(fs::make_directories(dir()), "");  // the trace file's folder must exist
  auto session = std::make_unique<Session>(Options()
                                               .report_dir(dir())
                                               .run_name("outlived")
                                               .print_report(false)
                                               .trace_file(dir() + "/outlived.trace.json")
                                               .warnings(w.handler()));
  auto model = tiny_model();
  session->watch(*model);
  {
    auto e = session->epoch();
    auto step = e.step(4);
    auto f = step.forward();
    ModuleScope block("block");  // a traced module range: the trace file is the session's
    session.reset();             // e.g. a unique_ptr<Session> reset inside the loop
    // What the loop goes on doing in the scopes it still holds: no session is reached.
    auto x = step.to_device(torch::randn({4, 8}), torch::kCPU);
    auto b = step.backward();
    EXPECT_TRUE(torch::equal(fathom::forward(model, x), model->forward(x)));
  }
  EXPECT_TRUE(
      w.said("the Session ended while its epoch, step, phase, module scope(s) were still "
             "open"))
      << w.all();
  EXPECT_TRUE(w.said("epoch 0, still open, is not in the report")) << w.all();
  // A later session on the same thread is reached by module scopes, not the freed one.
  Session next(Options().report_dir(dir()).run_name("next").print_report(false));
  {
    auto e = next.epoch();
    auto step = e.step(4);
    one_step(step, model);
  }
  ASSERT_EQ(next.report().epochs.size(), 1u);
  EXPECT_EQ(next.report().epochs[0].steps, 1);
}

// Issue 25: a Session ended on another thread than its loop's (a Session the main thread owns, its
// loop on a worker) left the freed state on the loop thread's list of current sessions, where
// the next fathom::forward or module range found it: a use-after-free. The loop's thread now
// finds no session, and its scopes end as no-ops.
TEST_F(SessionTest, ASessionEndedOnAnotherThreadIsFoundByNoneOfTheLoopsScopes) {
  Warnings w;
  auto session = std::make_unique<Session>(
      Options().report_dir(dir()).run_name("crossed").print_report(false).warnings(w.handler()));
  auto model = tiny_model();
  session->watch(*model);
  std::promise<void> opened, ended;
  std::thread loop([&] {
    auto e = session->epoch();
    auto step = e.step(4);
    opened.set_value();
    ended.get_future().wait();
    ASSERT_EQ(detail::SessionState::current(), nullptr) << "the ended session's freed state";
    auto x = torch::randn({4, 8});
    auto f = step.forward();
    EXPECT_TRUE(torch::equal(fathom::forward(model, x), model->forward(x)));
  });
  opened.get_future().wait();
  session.reset();  // on this thread, while the loop's epoch and step are open on its own
  ended.set_value();
  loop.join();
  EXPECT_TRUE(w.said("the Session ended while its epoch, step scope(s) were still open"))
      << w.all();
}

// Was: the inner epoch silently replaced the outer one (its steps lost), and the outer one's end
// found no epoch; the inner epoch's report then read the outer's steps as a data-loading stall.
TEST_F(SessionTest, AnEpochInsideAnEpochIsIgnoredWithAWarningAndItsStepsCount) {
  Warnings w;
  Session session(Options().report_dir(dir()).print_report(false).warnings(w.handler()));
  auto model = tiny_model();
  session.watch(*model);
  {
    auto outer = session.epoch();
    for (int i = 0; i < 2; ++i) {
      auto step = outer.step(4);
      one_step(step, model);
    }
    {
      auto inner = session.epoch();
      for (int i = 0; i < 3; ++i) {
        auto step = inner.step(4);
        one_step(step, model);
      }
    }
  }
  ASSERT_EQ(session.report().epochs.size(), 1u) << w.all();
  const EpochSummary& e = session.report().epochs[0];
  EXPECT_EQ(e.steps, 5);
  EXPECT_EQ(e.samples, 20);
  // The bogus finding: the outer epoch's steps read as a critical wait on data.
  for (const Finding& f : e.findings)
    EXPECT_FALSE(f.severity == Severity::Critical &&
                 f.title.find("data loading") != std::string::npos)
        << f.title;
  EXPECT_TRUE(w.said("an epoch scope opened inside epoch 0, which is still open: it is ignored"))
      << w.all();
}

// Was accepted: two steps counted, the inner one's data phase the outer one's time.
TEST_F(SessionTest, AStepInsideAStepIsIgnoredWithAWarningAndItsPhasesCount) {
  Warnings w;
  Session session(Options().report_dir(dir()).print_report(false).warnings(w.handler()));
  auto model = tiny_model();
  {
    auto e = session.epoch();
    auto outer = e.step(4);
    {
      auto inner = e.step(4);
      one_step(inner, model);
    }
  }
  ASSERT_EQ(session.report().epochs.size(), 1u);
  const EpochSummary& e = session.report().epochs[0];
  EXPECT_EQ(e.steps, 1);
  EXPECT_EQ(e.samples, 4);
  EXPECT_EQ(e.phase(Phase::Forward).count, 1);
  EXPECT_TRUE(w.said("a step scope opened inside step 0, which is still open: it is ignored"))
      << w.all();
}

// Was: `samples: -24` and a negative throughput in the report; a sum past int64 wrapped.
TEST_F(SessionTest, ASampleCountNoBatchHasIsRefused) {
  for (Mode mode : {Mode::Suggest, Mode::Off}) {
    Session session(Options().report_dir(dir()).mode(mode).print_report(false));
    auto e = session.epoch();
    EXPECT_THROW((void)e.step(-24), Error);
    EXPECT_THROW((void)e.step(std::numeric_limits<std::int64_t>::max()), Error);
    EXPECT_THROW((void)e.step(kMaxStepSamples + 1), Error);
    EXPECT_THROW(guarded_step(e, -1, [](StepScope&) {}), Error);
    EXPECT_EQ(guarded_step(e, kMaxStepSamples, [](StepScope&) {}), 1);
  }
  try {
    Session session(Options().report_dir(dir()).print_report(false));
    auto e = session.epoch();
    (void)e.step(-24);
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("a step of -24 samples is not valid"), std::string::npos)
        << err.what();
  }
}

// Was accepted: a NaN tolerance turns every comparison false (never rolls back), an infinite one
// allows any loss, a negative warm-up was silently raised to 3.
TEST_F(SessionTest, AmpOptionsNoStepCouldUseAreRefusedAlsoWhenOff) {
  for (Mode mode : {Mode::Auto, Mode::Off}) {
    Session session(Options().report_dir(dir()).mode(mode).print_report(false));
    for (double t : {std::nan(""), std::numeric_limits<double>::infinity(), -0.5})
      EXPECT_THROW(configure_amp(session, AmpOptions().tolerance(t)), Error) << t;
    EXPECT_THROW(configure_amp(session, AmpOptions().warmup_steps(-1)), Error);
    EXPECT_THROW(configure_amp(session, AmpOptions().watch_steps(-1)), Error);
    EXPECT_NO_THROW(configure_amp(session, AmpOptions().tolerance(0).warmup_steps(0)));
  }
}

// Was: the summary's "report:" line printed the folder raw, escape sequence and all.
TEST_F(SessionTest, AReportFolderWithAnEscapeIsPrintedEscaped) {
  std::string printed;
  Warnings w;
  {
    Session session(Options()
                        .report_dir(dir() + "/r\x1b]0;owned\x07")
                        .run_name("run")
                        .print_to([&](std::string_view t) { printed += t; })
                        .warnings(w.handler()));
    auto model = tiny_model();
    auto e = session.epoch();
    auto step = e.step(4);
    one_step(step, model);
  }
  ASSERT_NE(printed.find("report: "), std::string::npos) << printed;
  EXPECT_NE(printed.find("r\\x1b]0;owned\\x07"), std::string::npos) << printed;
  EXPECT_EQ(printed.find('\x1b'), std::string::npos) << printed;
  EXPECT_EQ(printed.find('\x07'), std::string::npos) << printed;
}

}  // namespace
}  // namespace fathom
