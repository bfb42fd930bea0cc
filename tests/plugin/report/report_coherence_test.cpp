// One coherent set of numbers and words in a report (issue 16, point 9): phase shares that add up
// and that the data finding repeats, findings ordered with what fathom applied last and labelled
// applied, fixes in the loop's language, and the compact epoch summary's "still true". Each test
// failed on the code before.
#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "advisor_fixtures.h"
#include "golden_reports.h"

namespace fathom {
namespace {

using test::epoch_with;
using test::evidence;
using test::find;

PhaseSummary& phase(EpochSummary& e, Phase p) { return e.phases[static_cast<std::size_t>(p)]; }

// The share column of the terminal phase table, row by row.
std::vector<std::pair<std::string, double>> table_shares(const std::string& text) {
  std::vector<std::pair<std::string, double>> out;
  const std::regex row(R"(\n  (\w+)\*?\s+\S+\s+[0-9.]+\s+([0-9.]+)%)");
  const auto table = text.substr(text.find("step time by phase"));
  for (std::sregex_iterator it(table.begin(), table.end(), row), end; it != end; ++it)
    out.emplace_back((*it)[1].str(), std::stod((*it)[2].str()));
  return out;
}

RunReport report_of(EpochSummary e, std::string language = "c++") {
  RunReport r;
  r.run_name = "r";
  r.environment.language = *loop_language_from_name(language);
  e.findings = advise(e, r.environment);
  r.epochs.push_back(std::move(e));
  return r;
}

// Explicit step.data() scopes run inside the steps: the finding said data / (steps + data),
// 18.2 %, where the table said data / steps, 22.2 %.
TEST(ReportCoherence, DataFindingSaysTheTablesShareForExplicitDataScopes) {
  EpochSummary e = epoch_with(1000, 0);
  PhaseSummary& data = phase(e, Phase::Data);
  data.inferred = false;
  data.wall_ms_total = 222;
  phase(e, Phase::Forward).wall_ms_total = 778;
  const RunReport r = report_of(e);
  const auto f = find(r.epochs[0].findings, finding_id::kDataLoaderBound);
  ASSERT_TRUE(f);
  EXPECT_EQ(evidence(*f, "data time share")->value, "22.2 %");
  const auto shares = table_shares(format_terminal_report(r));
  ASSERT_FALSE(shares.empty());
  EXPECT_EQ(shares[0].first, "data");
  EXPECT_DOUBLE_EQ(shares[0].second, 22.2);
}

// The inferred gap lies between the steps: the shares are of steps plus gaps, and with the time
// outside any scope ("other") they add up to 100 % (they summed to 102 %).
TEST(ReportCoherence, PhaseSharesAddUpWithTheInferredDataGap) {
  EpochSummary e = epoch_with(800, 200);
  phase(e, Phase::Forward).wall_ms_total = 500;
  phase(e, Phase::Backward).count = 10;
  phase(e, Phase::Backward).wall_ms_total = 250;
  const RunReport r = report_of(e);
  const auto shares = table_shares(format_terminal_report(r));
  double sum = 0;
  for (const auto& [name, share] : shares) sum += share;
  ASSERT_EQ(shares.size(), 4u);  // data, forward, backward, other
  EXPECT_EQ(shares.back().first, "other");
  EXPECT_NEAR(sum, 100.0, 0.15);
  const auto f = find(r.epochs[0].findings, finding_id::kDataLoaderBound);
  ASSERT_TRUE(f);
  EXPECT_EQ(evidence(*f, "data time share")->value, "20.0 %");
  EXPECT_NEAR(shares[0].second, 20.0, 1e-9);
}

// A plan fathom applied is not a critical problem: it is info, labelled applied, after the
// findings left to act on.
TEST(ReportCoherence, AppliedFixesComeLastAndAreLabelledApplied) {
  EpochSummary e = epoch_with(1000, 0);
  phase(e, Phase::Forward).wall_ms_total = 500;  // unaccounted: info
  ModuleReport m;
  CheckpointPlanReport p;
  p.chain = "features";
  p.feasible = false;  // the rule rates it critical
  p.applied = true;
  p.unconstrained_peak_bytes = 100 << 20;
  p.predicted_peak_bytes = 80 << 20;
  p.code = "fathom::checkpoint(...)";
  m.plans.push_back(p);
  e.modules = m;
  const RunReport r = report_of(e);
  const auto& fs = r.epochs[0].findings;
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].id, finding_id::kScopesUnaccounted);
  EXPECT_EQ(fs[1].id, finding_id::kActivationCheckpointing);
  EXPECT_EQ(fs[1].severity, Severity::Info);
  const std::string text = format_terminal_report(r);
  EXPECT_NE(text.find("[applied]  fathom checkpoints activations of features"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("[critical]"), std::string::npos) << text;
}

// No LibTorch in a Python loop's fixes: every finding the recorded and synthetic runs make.
TEST(ReportCoherence, PythonLoopsGetPythonFixes) {
  const std::regex cpp(R"((::|\bauto [a-z]|->|std::|^//|;$|\{ ))", std::regex::multiline);
  std::set<std::string> ids;
  std::vector<EpochSummary> epochs;
  for (const char* name :
       {"cpu_cnn_batch16.report.json", "cpu_cnn_batch64.report.json", "synthetic_h100.report.json"})
    for (const EpochSummary& e : test::golden_report(name).epochs) epochs.push_back(e);
  EpochSummary host = epoch_with(500, 500);
  phase(host, Phase::Forward).wall_ms_total = 100;
  host.copies.push_back(
      CopySummary{CopyDirection::HostToDevice, false, false, 10, 100 << 20, 50.0});
  epochs.push_back(host);
  Environment py;
  py.language = LoopLanguage::Python;
  py.device = "cuda:0";
  py.device_memory_bytes = 80LL << 30;
  for (const EpochSummary& e : epochs) {
    for (const Finding& f : advise(e, py)) {
      ids.insert(f.id);
      EXPECT_FALSE(std::regex_search(f.fix, cpp)) << f.id << ":\n" << f.fix;
    }
  }
  EXPECT_GE(ids.size(), 5u);
  // And C++ loops keep C++.
  const auto f = find(advise(host, Environment{}), finding_id::kDataLoaderBound);
  ASSERT_TRUE(f);
  EXPECT_NE(f->fix.find("torch::data::DataLoaderOptions"), std::string::npos);
}

TEST(ReportCoherence, LanguageRoundTripsThroughJson) {
  RunReport r = report_of(epoch_with(1000, 0), "python");
  EXPECT_EQ(parse_json_report(format_json_report(r), "t").environment.language,
            LoopLanguage::Python);
}

// The compact summary: a few lines, no fix code; a finding said before is "still true".
TEST(ReportCoherence, SummarySaysARepeatedFindingOnceThenStillTrue) {
  EpochSummary e = epoch_with(1000, 0);
  phase(e, Phase::Forward).wall_ms_total = 500;
  RunReport r = report_of(e);
  r.epochs.push_back(r.epochs[0]);
  r.epochs[1].index = 1;
  std::set<std::string> said;
  const std::string first = format_terminal_summary(r, 0, said);
  const std::string second = format_terminal_summary(r, 1, said);
  EXPECT_NE(first.find("1. [info]     Part of each step runs outside any phase scope"),
            std::string::npos)
      << first;
  EXPECT_EQ(first.find("fix"), std::string::npos) << first;
  EXPECT_NE(second.find("still true: Part of each step runs outside any phase scope"),
            std::string::npos)
      << second;
  EXPECT_EQ(second.find("1."), std::string::npos) << second;
  EXPECT_LE(std::count(first.begin(), first.end(), '\n'), 5);
}

}  // namespace
}  // namespace fathom
