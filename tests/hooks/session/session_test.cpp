#include <dirent.h>
#include <fathom/fathom.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/atomic_file.h"
#include "scoped_env.h"
#include "session_fixture.h"

namespace fathom {
namespace {

using test::ScopedEnv;
using test::SessionTest;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One epoch of `steps` steps on a tiny model, every phase scoped.
void train(Session& session, torch::nn::Sequential& model, int steps) {
  torch::optim::SGD opt(model->parameters(), 0.01);
  auto e = session.epoch();
  for (int i = 0; i < steps; ++i) {
    auto step = e.step(4);
    auto x = step.to_device(torch::randn({4, 8}), torch::kCPU);
    torch::Tensor loss;
    {
      auto f = step.forward();
      loss = fathom::forward(model, x).sum();
    }
    {
      auto b = step.backward();
      opt.zero_grad();
      loss.backward();
    }
    {
      auto o = step.optimizer();
      opt.step();
    }
  }
}

TEST_F(SessionTest, EpochWritesAJsonReportWithPhaseTimes) {
  Session session(Options().report_dir(dir()).run_name("run").print_report(false));
  auto model = tiny_model();
  session.watch(*model);
  train(session, model, 5);
  ASSERT_EQ(session.report().epochs.size(), 1u);
  const EpochSummary& e = session.report().epochs[0];
  EXPECT_EQ(e.steps, 5);
  EXPECT_EQ(e.samples, 20);
  EXPECT_GT(e.samples_per_second(), 0);
  for (Phase p : {Phase::Forward, Phase::Backward, Phase::Optimizer}) {
    EXPECT_EQ(e.phase(p).count, 5) << phase_name(p);
    EXPECT_GT(e.phase(p).wall_ms_total, 0) << phase_name(p);
    EXPECT_TRUE(e.phase(p).rss_bytes_max.has_value()) << phase_name(p);
  }
  EXPECT_TRUE(e.phase(Phase::Data).inferred);
  EXPECT_EQ(e.phase(Phase::Data).count, 5);
  ASSERT_TRUE(e.peak_rss_bytes.has_value());
  EXPECT_GT(*e.peak_rss_bytes, 0);
  EXPECT_EQ(session.report_path(), dir() + "/run.json");
  session.flush_report();  // while the session runs, its epochs are in the journal run.jsonl
  RunReport back = read_report_file(session.report_path());
  ASSERT_EQ(back.epochs.size(), 1u);
  EXPECT_EQ(back.epochs[0].steps, 5);
  EXPECT_EQ(back.environment.device, "cpu");
  EXPECT_FALSE(back.environment.not_measured.empty());  // CPU run: device figures said missing
}

TEST_F(SessionTest, HtmlReportBesideTheJsonAtTheSessionsEnd) {
  {
    Session session(Options().report_dir(dir()).run_name("run").print_report(false));
    auto model = tiny_model();
    train(session, model, 1);
    session.flush_report();
    EXPECT_FALSE(fs::exists(dir() + "/run.html"));  // rendered once, at the end
  }
  EXPECT_EQ(parse_json_report(slurp(dir() + "/run.json"), "run.json").epochs.size(), 1u);
  EXPECT_FALSE(fs::exists(dir() + "/run.jsonl"));
  const std::string html = slurp(dir() + "/run.html");
  EXPECT_NE(html.find("<html"), std::string::npos);
  EXPECT_NE(html.find("run"), std::string::npos);
}

TEST_F(SessionTest, FootprintCountsParametersGradientsAndOptimizerState) {
  Session session(Options().report_dir(dir()).run_name("run").print_report(false));
  auto model = tiny_model();
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  session.watch(*model);
  session.watch(opt);
  {
    auto e = session.epoch();
    auto step = e.step(4);
    opt.zero_grad();
    fathom::forward(model, torch::randn({4, 8})).sum().backward();
    opt.step();
  }
  const auto& f = session.report().epochs.at(0).footprint;
  ASSERT_TRUE(f.has_value());
  const std::int64_t params = 8 * 16 + 16 + 16 * 4 + 4;
  EXPECT_EQ(f->parameter_count, params);
  EXPECT_EQ(f->parameter_bytes, params * 4);
  EXPECT_EQ(f->gradient_bytes, params * 4);
  ASSERT_TRUE(f->optimizer_state_bytes.has_value());
  EXPECT_EQ(*f->optimizer_state_bytes, params * 4);  // one momentum buffer per parameter
}

TEST_F(SessionTest, FootprintWithoutAWatchedOptimizerSaysSoInsteadOfZero) {
  Session session(Options().report_dir(dir()).print_report(false));
  auto model = tiny_model();
  session.watch(*model);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto e = session.epoch();
    auto step = e.step(4);
    opt.zero_grad();
    fathom::forward(model, torch::randn({4, 8})).sum().backward();
    opt.step();
  }
  const RunReport r = session.report();
  for (const auto& e : r.epochs) {
    ASSERT_TRUE(e.footprint.has_value());
    EXPECT_FALSE(e.footprint->optimizer_state_bytes.has_value());
  }
  int notes = 0;
  for (const auto& u : r.environment.not_measured)
    if (u.what == "optimizer state bytes") {
      ++notes;
      EXPECT_NE(u.why.find("session.watch(optimizer)"), std::string::npos) << u.why;
    }
  EXPECT_EQ(notes, 1);  // once per run, not once per epoch
}

TEST_F(SessionTest, EveryEpochIsAppendedToTheReport) {
  Session session(Options().report_dir(dir()).run_name("run").print_report(false));
  auto model = tiny_model();
  train(session, model, 2);
  train(session, model, 3);
  session.flush_report();
  RunReport back = read_report_file(session.report_path());
  ASSERT_EQ(back.epochs.size(), 2u);
  EXPECT_EQ(back.epochs[0].index, 0);
  EXPECT_EQ(back.epochs[1].index, 1);
  EXPECT_EQ(back.epochs[1].steps, 3);
}

TEST_F(SessionTest, ExceptionInForwardKeepsTheMeasurementsAndWritesTheReport) {
  Session session(Options().report_dir(dir()).run_name("run").print_report(false));
  auto model = tiny_model();
  try {
    auto e = session.epoch();
    {
      auto step = e.step(4);
      auto f = step.forward();
    }
    auto step = e.step(4);
    auto f = step.forward();
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  ASSERT_EQ(session.report().epochs.size(), 1u);
  const EpochSummary& e = session.report().epochs[0];
  EXPECT_TRUE(e.ended_by_exception);
  EXPECT_EQ(e.steps, 2);
  EXPECT_EQ(e.failed_steps, 1);
  EXPECT_EQ(e.phase(Phase::Forward).count, 2);
  EXPECT_EQ(e.phase(Phase::Forward).aborted, 1);
  // On disk before the exception was caught (an epoch ended by one waits for the disk).
  const RunReport back = read_report_file(session.report_path());
  ASSERT_EQ(back.epochs.size(), 1u);
  EXPECT_TRUE(back.epochs[0].ended_by_exception);
}

TEST_F(SessionTest, ModeOffDoesNothingMeasurable) {
  ScopedEnv off("FATHOM_MODE", "off");
  Session session(Options().report_dir(dir()).run_name("run"));
  EXPECT_FALSE(session.active());
  auto model = tiny_model();
  train(session, model, 2);
  EXPECT_TRUE(session.report().epochs.empty());
  EXPECT_TRUE(session.report_path().empty());
  EXPECT_FALSE(fs::exists(dir()));  // not even the folder
}

TEST_F(SessionTest, BadEnvironmentValueFailsAtSessionStart) {
  ScopedEnv bad("FATHOM_NVTX", "everything");
  try {
    Session session(Options().report_dir(dir()));
    FAIL() << "expected fathom::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("FATHOM_NVTX"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("off|phases|modules|ops"), std::string::npos);
  }
}

TEST_F(SessionTest, UnwritableReportFolderFailsAtSessionStart) {
  ASSERT_EQ(fs::make_directories(dir()), "");
  std::ofstream(dir() + "/file") << "x";
  EXPECT_THROW(Session(Options().report_dir(dir() + "/file/reports")), Error);
}

// Options::warnings takes every warning of the session (here: its report could not be written),
// and nothing of it reaches standard error.
TEST_F(SessionTest, WarningsGoWhereTheOptionsSay) {
  std::vector<std::string> said;
  ::testing::internal::CaptureStderr();
  {
    Session session(Options().report_dir(dir()).run_name("w").print_report(false).warnings(
        [&](std::string_view m) { said.emplace_back(m); }));
    fs::remove_tree(dir());
    std::ofstream(dir()) << "x";  // the report folder is a file now
    auto model = tiny_model();
    train(session, model, 1);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "");
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said[0].find(dir()), std::string::npos) << said[0];
  ::unlink(dir().c_str());
}

// A report that could not be written is not named as if it were (issue 17: "report: PATH" was
// printed for a file that did not exist). Fails on the code before.
TEST_F(SessionTest, TheSummaryNamesOnlyAReportThatWasWritten) {
  ::testing::internal::CaptureStderr();
  {
    Session session(Options().report_dir(dir()).run_name("lost").warnings([](std::string_view) {}));
    fs::remove_tree(dir());
    std::ofstream(dir()) << "x";  // the report folder is a file now
    auto model = tiny_model();
    train(session, model, 1);
  }
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.find("report: " + dir()), std::string::npos) << out;
  EXPECT_NE(out.find("report: not written"), std::string::npos) << out;
  ::unlink(dir().c_str());
}

// Two live runs with one run name in one folder: the second writes `<name>-2.json` and says so,
// instead of both overwriting one report (issue 17). Fails on the code before.
TEST_F(SessionTest, ASecondLiveRunWithTheSameNameWritesItsOwnReport) {
  std::vector<std::string> said;
  Session first(Options().report_dir(dir()).run_name("same").print_report(false));
  Session second(Options().report_dir(dir()).run_name("same").print_report(false).warnings(
      [&](std::string_view m) { said.emplace_back(m); }));
  EXPECT_EQ(first.report_path(), dir() + "/same.json");
  EXPECT_EQ(second.report_path(), dir() + "/same-2.json");
  EXPECT_EQ(second.report().run_name, "same-2");
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("in use by another live run"), std::string::npos) << said[0];
}

// Temporaries a killed run left are removed when the next session starts in that folder.
// Fails on the code before (nothing removed them).
TEST_F(SessionTest, TemporariesOfKilledRunsAreRemovedAtStart) {
  ASSERT_EQ(fs::make_directories(dir()), "");
  // A temporary named as this host's killed run named it (atomic_file.h): the child dies with it.
  const pid_t child = ::fork();
  if (child == 0) {
    std::string name;
    ::_exit(detail::create_new_file(dir() + "/run.json.tmp.", name) >= 0 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const std::string stale = "run.json.tmp." + detail::host_tag() + "." + std::to_string(child);
  auto stale_left = [&] {  // no std::filesystem here (base/file_system.h says why)
    DIR* d = ::opendir(dir().c_str());
    bool found = false;
    while (const dirent* e = d ? ::readdir(d) : nullptr)
      found = found || std::string(e->d_name).rfind(stale + ".", 0) == 0;
    if (d) ::closedir(d);
    return found;
  };
  ASSERT_TRUE(stale_left());
  Session session(Options().report_dir(dir()).run_name("run").print_report(false).warnings(
      [](std::string_view) {}));
  EXPECT_FALSE(stale_left());
}

TEST_F(SessionTest, EnvironmentRedirectsTheReport) {
  ScopedEnv redirect("FATHOM_REPORT_DIR", (dir() + "/elsewhere").c_str());
  Session session(Options().report_dir(dir() + "/in-code").run_name("run").print_report(false));
  auto model = tiny_model();
  train(session, model, 1);
  session.flush_report();
  EXPECT_TRUE(fs::exists(dir() + "/elsewhere/run.jsonl"));
  EXPECT_FALSE(fs::exists(dir() + "/in-code"));
}

TEST_F(SessionTest, SuggestModeRunsTheAdvisorObserveDoesNot) {
  // A slow "loader" between steps: the data rule must fire in Suggest mode, and Observe mode
  // lists no findings.
  {
    Session session(
        Options().report_dir(dir()).run_name("s").mode(Mode::Suggest).print_report(false));
    {
      auto e = session.epoch();
      for (int i = 0; i < 3; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        auto step = e.step(1);
        auto f = step.forward();
      }
    }
    const auto& fs = session.report().epochs.at(0).findings;
    ASSERT_FALSE(fs.empty());
    EXPECT_EQ(fs[0].id, "data.loader_bound");
  }
  {
    Session session(
        Options().report_dir(dir()).run_name("o").mode(Mode::Observe).print_report(false));
    {
      auto e = session.epoch();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      auto step = e.step(1);
    }
    EXPECT_TRUE(session.report().epochs.at(0).findings.empty());
  }
}

}  // namespace
}  // namespace fathom
