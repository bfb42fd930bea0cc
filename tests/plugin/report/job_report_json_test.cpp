#include <fathom/job_merge.h>
#include <fathom/job_report.h>
#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "rank_fixtures.h"

namespace fathom {
namespace {

TEST(JobReportJson, WritesTheMergedEpoch) {
  JobReport report;
  report.run_name = "job";
  report.world_size = 3;
  auto ranks = testing::synchronous_job({10, 40});
  for (auto& s : ranks) s.rank.world_size = 3;
  ranks[1].device_peak_allocated_bytes = 1 << 30;
  ranks[1].top_findings = {{"data.loader_bound", Severity::Warning}};
  JobEpoch e = merge_rank_summaries(0, 3, ranks);
  e.waited_ms = 1500;
  report.epochs.push_back(e);
  const auto j = nlohmann::json::parse(format_job_json(report));
  EXPECT_EQ(j["schema"], "fathom.job_report");
  EXPECT_EQ(j["schema_version"], kJobReportSchemaVersion);
  EXPECT_EQ(j["world_size"], 3);
  const auto& ej = j["epochs"][0];
  EXPECT_EQ(ej["reported_ranks"], 2);
  EXPECT_EQ(ej["missing_ranks"], nlohmann::json::array({2}));
  EXPECT_EQ(ej["waited_ms"], 1500.0);
  EXPECT_EQ(ej["slowest_rank"], 1);
  EXPECT_EQ(ej["fastest_rank"], 0);
  EXPECT_DOUBLE_EQ(ej["skew_ms"].get<double>(), 30.0);
  EXPECT_EQ(ej["work_measured_as"], "step_minus_communication_wait");
  const auto& r1 = ej["ranks"][1];
  EXPECT_EQ(r1["rank"], 1);
  EXPECT_DOUBLE_EQ(r1["work_ms_mean"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(r1["phase_ms_per_step"]["data"].get<double>(), 1.0);
  EXPECT_EQ(r1["communication"]["source"], "host");
  EXPECT_DOUBLE_EQ(r1["communication"]["exposed_ms_per_step"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r1["communication"]["busy_ms_per_step"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(r1["communication"]["overlap_share"].get<double>(), 0.8);
  EXPECT_EQ(r1["device_peak_allocated_bytes"], 1 << 30);
  EXPECT_TRUE(ej["ranks"][0]["device_peak_allocated_bytes"].is_null());
  EXPECT_EQ(r1["top_findings"][0]["id"], "data.loader_bound");
  std::vector<std::string> ids;
  for (const auto& f : ej["findings"]) ids.push_back(f["id"]);
  EXPECT_EQ(ids, (std::vector<std::string>{"distributed.missing_ranks", "distributed.straggler"}));
}

TEST(JobReportJson, UnmeasuredCommunicationHasNoNumbers) {
  JobReport report;
  auto s = testing::rank_summary(0, 1, 10);
  s.comm = {};
  report.epochs.push_back(merge_rank_summaries(0, 1, {s}));
  const auto j = nlohmann::json::parse(format_job_json(report));
  const auto& comm = j["epochs"][0]["ranks"][0]["communication"];
  EXPECT_EQ(comm["source"], "none");
  EXPECT_FALSE(comm.contains("busy_ms_per_step"));
  EXPECT_EQ(j["epochs"][0]["work_measured_as"], "step_time");
}

}  // namespace
}  // namespace fathom
