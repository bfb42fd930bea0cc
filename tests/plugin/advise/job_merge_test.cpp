#include <fathom/job_merge.h>
#include <fathom/job_report.h>
#include <gtest/gtest.h>

#include "rank_fixtures.h"

namespace fathom {
namespace {

using testing::rank_summary;
using testing::synchronous_job;

TEST(JobMerge, NamesTheSlowestRankAndTheSkew) {
  // Rank 2 does 30 ms of work per step, the others 10; the others wait for it in the all-reduce.
  const JobEpoch e = merge_rank_summaries(0, 4, synchronous_job({10, 10, 40, 10}));
  ASSERT_EQ(e.ranks.size(), 4u);
  EXPECT_TRUE(e.missing_ranks.empty());
  EXPECT_TRUE(e.work_from_comm);
  EXPECT_EQ(e.slowest_rank, 2);
  EXPECT_DOUBLE_EQ(e.work_ms_slowest, 40.0);
  EXPECT_DOUBLE_EQ(e.work_ms_fastest, 10.0);
  EXPECT_DOUBLE_EQ(e.work_ms_median, 10.0);
  EXPECT_DOUBLE_EQ(e.skew_ms, 30.0);
  EXPECT_DOUBLE_EQ(e.skew_share, 3.0);
  // Every rank's step took the same time: step time alone could not name the straggler.
  for (const RankSummary& s : e.ranks) EXPECT_DOUBLE_EQ(s.step_ms_mean(), 40.5);
}

TEST(JobMerge, ComparesMediansWhenTheRanksSentThem) {
  // Rank 0's mean carries one 300 ms warm-up step; its median does not.
  auto ranks = synchronous_job({40, 10});
  ranks[0].work_ms_median = 10.0;
  ranks[1].work_ms_median = 12.0;
  const JobEpoch e = merge_rank_summaries(0, 2, ranks);
  EXPECT_TRUE(e.work_is_median);
  EXPECT_EQ(e.slowest_rank, 1);
  EXPECT_DOUBLE_EQ(e.skew_ms, 2.0);
  ranks[1].work_ms_median.reset();  // one rank without: still compared, but not "median"
  EXPECT_FALSE(merge_rank_summaries(0, 2, ranks).work_is_median);
}

TEST(JobMerge, WithoutCommunicationFallsBackToStepTime) {
  auto ranks = synchronous_job({10, 25});
  for (auto& s : ranks) s.comm = {};
  const JobEpoch e = merge_rank_summaries(0, 2, ranks);
  EXPECT_FALSE(e.work_from_comm);
  EXPECT_DOUBLE_EQ(e.skew_ms, 0.0);  // synchronous all-reduce evened the steps out
}

TEST(JobMerge, NamesMissingRanksAndSortsByRank) {
  std::vector<RankSummary> got{rank_summary(3, 5, 10), rank_summary(0, 5, 10),
                               rank_summary(1, 5, 12)};
  const JobEpoch e = merge_rank_summaries(0, 5, got, {{4, "bad magic"}});
  ASSERT_EQ(e.ranks.size(), 3u);
  EXPECT_EQ(e.ranks[0].rank.rank, 0);
  EXPECT_EQ(e.ranks[1].rank.rank, 1);
  EXPECT_EQ(e.ranks[2].rank.rank, 3);
  EXPECT_EQ(e.missing_ranks, (std::vector<int>{2, 4}));
  ASSERT_FALSE(e.findings.empty());
  EXPECT_EQ(e.findings[0].id, "distributed.missing_ranks");
  EXPECT_NE(e.findings[0].title.find("ranks 2, 4"), std::string::npos) << e.findings[0].title;
}

TEST(JobMerge, LeavesOutSummariesOfAnotherEpochOrJob) {
  auto other_epoch = rank_summary(1, 2, 10);
  other_epoch.epoch = 5;
  auto other_job = rank_summary(1, 3, 10);
  auto dup = rank_summary(0, 2, 99);
  const JobEpoch e =
      merge_rank_summaries(0, 2, {rank_summary(0, 2, 10), other_epoch, other_job, dup});
  ASSERT_EQ(e.ranks.size(), 1u);
  EXPECT_DOUBLE_EQ(e.ranks[0].work_ms_mean(), 10.0);  // the first of two summaries from rank 0
  EXPECT_EQ(e.missing_ranks, std::vector<int>{1});
  EXPECT_EQ(e.unreadable.size(), 2u);
}

TEST(JobMerge, NoRankReported) {
  const JobEpoch e = merge_rank_summaries(3, 2, {});
  EXPECT_EQ(e.missing_ranks, (std::vector<int>{0, 1}));
  EXPECT_FALSE(e.slowest_rank);
}

TEST(JobMerge, RanksWithoutStepsDoNotCountForSpeed) {
  auto idle = rank_summary(1, 2, 0);
  idle.steps = 0;
  const JobEpoch e = merge_rank_summaries(0, 2, {rank_summary(0, 2, 10), idle});
  EXPECT_EQ(e.slowest_rank, 0);
  EXPECT_EQ(e.fastest_rank, 0);
  EXPECT_DOUBLE_EQ(e.skew_ms, 0.0);
}

}  // namespace
}  // namespace fathom
