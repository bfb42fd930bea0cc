#include "advise/job_findings.h"

#include <fathom/job_merge.h>
#include <fathom/job_report.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "advise/advisor.h"
#include "rank_fixtures.h"

namespace fathom {
namespace {

using testing::rank_summary;
using testing::synchronous_job;

const Finding* find(const JobEpoch& e, std::string_view id) {
  auto it = std::find_if(e.findings.begin(), e.findings.end(),
                         [&](const Finding& f) { return f.id == id; });
  return it == e.findings.end() ? nullptr : &*it;
}

std::string evidence(const Finding& f, std::string_view name) {
  for (const Evidence& ev : f.evidence)
    if (ev.name == name) return ev.value;
  return "<none>";
}

TEST(JobFindings, Straggler) {
  const JobEpoch e = merge_rank_summaries(0, 4, synchronous_job({10, 10, 10, 16}));
  const Finding* f = find(e, "distributed.straggler");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::Critical);  // 60% more work than the others
  EXPECT_NE(f->title.find("Rank 3"), std::string::npos) << f->title;
  EXPECT_EQ(evidence(*f, "rank 3 work per step"), "16.00 ms");
  EXPECT_EQ(evidence(*f, "median of the other ranks"), "10.00 ms");
  EXPECT_EQ(evidence(*f, "skew (slowest - fastest)"), "6.00 ms (60.0 %)");
  EXPECT_EQ(evidence(*f, "the other ranks' communication wait per step (median)"), "6.50 ms");
  EXPECT_EQ(evidence(*f, "rank 3 data wait per step (others' median)"), "1.00 ms (1.00 ms)");
  ASSERT_TRUE(f->gain_fraction);
  EXPECT_NEAR(*f->gain_fraction, 6.0 / 16.5, 1e-9);
}

TEST(JobFindings, NoStragglerWithinTheThreshold) {
  // 5% more work: below kStragglerShare.
  EXPECT_EQ(
      find(merge_rank_summaries(0, 3, synchronous_job({20, 20, 21})), "distributed.straggler"),
      nullptr);
  // 20% more but only 0.2 ms: below kStragglerMinMs.
  EXPECT_EQ(find(merge_rank_summaries(0, 2, synchronous_job({1.0, 1.2})), "distributed.straggler"),
            nullptr);
}

TEST(JobFindings, TwoRanksOneSlowed) {
  // The CI test's shape: two ranks, rank 1 slowed by 30 ms per step.
  const JobEpoch e = merge_rank_summaries(0, 2, synchronous_job({8, 38}));
  const Finding* f = find(e, "distributed.straggler");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("Rank 1"), std::string::npos);
  EXPECT_DOUBLE_EQ(e.skew_ms, 30.0);
}

TEST(JobFindings, OneRankWaitingOnData) {
  std::vector<RankSummary> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(rank_summary(r, 4, 10, 0.5, r == 1 ? 6.0 : 0.5));
  const JobEpoch e = merge_rank_summaries(0, 4, ranks);
  const Finding* f = find(e, "distributed.rank_data_wait");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("Rank 1 waits on data"), std::string::npos) << f->title;
  EXPECT_EQ(evidence(*f, "rank 1 data wait per step"), "6.00 ms");
  EXPECT_EQ(evidence(*f, "median of the other ranks"), "0.50 ms");
}

TEST(JobFindings, EveryRankWaitingOnDataIsNotARankProblem) {
  std::vector<RankSummary> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(rank_summary(r, 4, 10, 0.5, 6.0));
  EXPECT_EQ(find(merge_rank_summaries(0, 4, ranks), "distributed.rank_data_wait"), nullptr);
}

TEST(JobFindings, LoadImbalance) {
  std::vector<RankSummary> ranks{rank_summary(0, 2, 10, 0.5, 0.5, 64),
                                 rank_summary(1, 2, 10, 0.5, 0.5, 48)};
  JobEpoch e = merge_rank_summaries(0, 2, ranks);
  const Finding* f = find(e, "distributed.load_imbalance");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(evidence(*f, "samples per step, rank 0"), "64.0");
  EXPECT_EQ(evidence(*f, "samples per step, rank 1"), "48.0");
  ranks[1] = rank_summary(1, 2, 10, 0.5, 0.5, 62);  // 3%: fine
  EXPECT_EQ(find(merge_rank_summaries(0, 2, ranks), "distributed.load_imbalance"), nullptr);
  ranks[1].steps = 5;  // half the steps
  ranks[1].samples = 5 * 62;
  e = merge_rank_summaries(0, 2, ranks);
  f = find(e, "distributed.load_imbalance");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(evidence(*f, "steps, rank 1"), "5");
}

TEST(JobFindings, ExposedCommunicationIsJudgedOnTheSlowestRank) {
  // The fast ranks wait 30 ms for the straggler; the straggler itself waits 0.5 ms: the
  // collectives are cheap, the straggler is the problem.
  EXPECT_EQ(find(merge_rank_summaries(0, 2, synchronous_job({10, 40})),
                 "distributed.communication_exposed"),
            nullptr);
  // Every rank waits 5 ms of 15: communication is exposed.
  const JobEpoch e = merge_rank_summaries(0, 2, synchronous_job({10, 10}, 5.0));
  const Finding* f = find(e, "distributed.communication_exposed");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("33.3 %"), std::string::npos) << f->title;
  EXPECT_EQ(evidence(*f, "hidden behind compute"), "28.6 %");  // 1 - 5 / 7
}

TEST(JobFindings, ExposedCommunicationNeedsEveryRank) {
  auto ranks = synchronous_job({10, 10, 10}, 5.0);
  ranks.pop_back();  // rank 2 never reported: it may have been the slowest
  const JobEpoch e = merge_rank_summaries(0, 3, ranks);
  EXPECT_EQ(find(e, "distributed.communication_exposed"), nullptr);
  EXPECT_NE(find(e, "distributed.missing_ranks"), nullptr);
}

TEST(JobFindings, StragglerSaysWhatWasCompared) {
  auto ranks = synchronous_job({10, 30});
  for (auto& r : ranks) r.work_ms_median = r.work_ms_mean();
  const JobEpoch e = merge_rank_summaries(0, 2, ranks);
  const Finding* f = find(e, "distributed.straggler");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(evidence(*f, "work measured as"),
            "median per step of step time less communication wait");
}

// Rank 0's wait reaches the merge as a typed field, so the finding carries it as made: nothing
// rewrites its evidence afterwards (hooks/src/distributed.cpp did, matching the row's name).
TEST(JobFindings, MissingRanksSayHowLongRankZeroWaitedAndItsTimeout) {
  auto ranks = synchronous_job({10, 10, 10});
  ranks.pop_back();
  const JobEpoch e = merge_rank_summaries(0, 3, ranks, {}, MergeWait{1234.7, 5000});
  EXPECT_DOUBLE_EQ(e.waited_ms, 1234.7);
  EXPECT_EQ(e.merge_timeout_ms, 5000);
  const Finding* f = find(e, finding_id::kRanksMissing);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(evidence(*f, "rank 0 waited"), "1234 ms (timeout 5000 ms)");
  // Without a timeout (an offline merge) the wait alone.
  const JobEpoch offline = merge_rank_summaries(0, 3, ranks, {}, MergeWait{12.5, std::nullopt});
  EXPECT_EQ(evidence(*find(offline, finding_id::kRanksMissing), "rank 0 waited"), "12.50 ms");
}

TEST(JobFindings, QuietJobHasNoFindings) {
  EXPECT_TRUE(merge_rank_summaries(0, 4, synchronous_job({10, 10.2, 9.9, 10.1})).findings.empty());
}

}  // namespace
}  // namespace fathom
