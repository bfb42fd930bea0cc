// Every setting a printed fix names is one fathom reads, with a value it accepts: a user who
// copies `FATHOM_X=v` from a report must get what the fix promises, not "ignoring FATHOM_X".
// The fixes come from the rules that make them (on epochs that fire them), not from a list here.
#include <fathom/error.h>
#include <fathom/job_merge.h>
#include <fathom/job_report.h>
#include <fathom/options.h>
#include <fathom/rank_info.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "advise/advisor.h"
#include "advisor_fixtures.h"
#include "analyze/tensor_core_analysis.h"
#include "rank_fixtures.h"
#include "scoped_env.h"

namespace fathom {
namespace {

using Setting = std::pair<std::string, std::string>;

// The `FATHOM_NAME=value` pairs in a text, values as a shell would pass them.
std::vector<Setting> settings_in(const std::string& text) {
  static const std::regex kSetting(R"(FATHOM_[A-Z0-9_]+(=[^\s;,)`'"]*)?)");
  std::vector<Setting> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kSetting);
       it != std::sregex_iterator(); ++it) {
    const std::string m = it->str();
    const auto eq = m.find('=');
    out.emplace_back(m.substr(0, eq), eq == std::string::npos ? "" : m.substr(eq + 1));
  }
  return out;
}

// What is wrong with running under `name=value`: "" when fathom reads it and accepts the value.
std::string problem_with(const Setting& s) {
  const auto& [name, value] = s;
  if (value.empty()) return name + " is named without a value to set it to";
  test::ScopedEnv env(name.c_str(), value.c_str());
  ::testing::internal::CaptureStderr();
  std::string error;
  try {
    (void)Options().with_env();
    (void)merge_timeout_from_environment(std::chrono::milliseconds(1));
  } catch (const Error& e) {
    error = e.what();
  }
  const std::string said = ::testing::internal::GetCapturedStderr();
  if (!error.empty()) return name + "=" + value + ": " + error;
  if (said.find("ignoring " + name) != std::string::npos) return name + "=" + value + ": " + said;
  return {};
}

void expect_every_setting_read(const std::string& where, const std::string& text) {
  const auto settings = settings_in(text);
  EXPECT_FALSE(settings.empty()) << where << " names no FATHOM_ setting:\n" << text;
  for (const Setting& s : settings) EXPECT_EQ(problem_with(s), "") << where << ":\n" << text;
}

TEST(FixSettings, TheSlowdownFixNamesTheVariableThatRecordsOps) {
  EpochSummary e = test::epoch_with(1000, 0, 100);
  StepSeries s;
  for (int i = 0; i < 100; ++i) s.points.push_back(StepPoint{.step = i, .step_ms = 10});
  StepChange c;
  c.step = 50;
  c.before_ms = 10;
  c.after_ms = 15;
  c.relative = 0.5;
  c.p_value = 1e-9;
  c.steps_before = c.steps_after = 50;
  c.phase = "backward";
  c.phase_before_ms = 4;
  c.phase_after_ms = 9;
  s.change = c;
  e.series = s;
  const auto f = test::find(advise(e, Environment{}), finding_id::kStepSlowdown);
  ASSERT_TRUE(f);
  expect_every_setting_read(f->id, f->fix);
}

TEST(FixSettings, TheMissingRanksFixSetsATimeoutFathomAccepts) {
  auto ranks = testing::synchronous_job({10, 10, 10});
  ranks.pop_back();
  const JobEpoch e = merge_rank_summaries(0, 3, ranks, {}, MergeWait{1234.7, 5000});
  const auto it = std::find_if(e.findings.begin(), e.findings.end(),
                               [](const Finding& f) { return f.id == finding_id::kRanksMissing; });
  ASSERT_NE(it, e.findings.end());
  expect_every_setting_read(it->id, it->fix);
}

TEST(FixSettings, TheUndecidedKernelsNoteAsksForShapesAsFathomReadsThem) {
  TensorCoreResult r;
  r.unknown_share = 0.5;
  r.op_dtypes_recorded = false;
  expect_every_setting_read("undecided kernels note", undecided_kernels_note(r));
}

// The check itself: it catches the name the slowdown fix used to print, and a value out of range.
TEST(FixSettings, AnUnreadVariableOrARejectedValueIsAProblem) {
  EXPECT_NE(problem_with({"FATHOM_OPS", "on"}), "");
  EXPECT_NE(problem_with({"FATHOM_NVTX", "on"}), "");
  EXPECT_NE(problem_with({"FATHOM_MERGE_TIMEOUT", "-1"}), "");
  EXPECT_EQ(problem_with({"FATHOM_NVTX", "ops"}), "");
  EXPECT_EQ(settings_in("a FATHOM_NVTX=ops, or FATHOM_MODE=auto)"),
            (std::vector<Setting>{{"FATHOM_NVTX", "ops"}, {"FATHOM_MODE", "auto"}}));
}

}  // namespace
}  // namespace fathom
