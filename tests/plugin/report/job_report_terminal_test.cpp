#include <fathom/job_merge.h>
#include <fathom/job_report.h>
#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include "rank_fixtures.h"

namespace fathom {
namespace {

TEST(JobReportTerminal, ShowsSlowestRankSkewAndMissingRanks) {
  JobReport report;
  report.run_name = "job";
  report.world_size = 3;
  auto ranks = testing::synchronous_job({10, 40});
  for (auto& s : ranks) s.rank.world_size = 3;
  report.epochs.push_back(merge_rank_summaries(0, 3, ranks));
  const std::string text = format_job_terminal(report);
  EXPECT_NE(text.find("epoch 0 - 2 of 3 ranks reported"), std::string::npos) << text;
  EXPECT_NE(text.find("missing ranks: 2"), std::string::npos) << text;
  EXPECT_NE(text.find("slowest rank 1: 40.00 ms work/step; fastest rank 0: 10.00 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("skew 30.00 ms (+300.0%)"), std::string::npos) << text;
  EXPECT_NE(text.find("<- slowest"), std::string::npos) << text;
  EXPECT_NE(text.find("[critical] Rank 1 is a straggler"), std::string::npos) << text;
}

TEST(JobReportTerminal, LongTablesShowTheEnds) {
  std::vector<double> work(100, 10.0);
  work[57] = 30.0;
  JobReport report;
  report.epochs.push_back(merge_rank_summaries(0, 100, testing::synchronous_job(work)));
  const std::string text = format_job_terminal(report);
  EXPECT_NE(text.find("84 ranks not shown"), std::string::npos) << text;
  EXPECT_NE(text.find("   57 node7"), std::string::npos) << text;  // the slowest row is shown
}

TEST(JobReportTerminal, EmptyReport) {
  EXPECT_EQ(format_job_terminal(JobReport{}), "fathom job report: no epoch merged yet\n");
}

}  // namespace
}  // namespace fathom
