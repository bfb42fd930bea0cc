#pragma once
// Rank 0's merge of the summaries every rank sends at an epoch end into the job report's epoch,
// with the cross-rank findings (a straggler, a skewed data wait, missing ranks).
#include <fathom/job_report.h>
#include <fathom/rank_summary.h>

#include <cstdint>
#include <vector>

namespace fathom {

// Merges the summaries rank 0 gathered for one epoch. Summaries for other epochs or outside
// [0, world_size) are left out (and named unreadable); a rank that sent twice counts once.
// Linear in the number of ranks, plus a sort: 1,000 ranks take well under a millisecond
// (bench/merge_bench.cpp).
JobEpoch merge_rank_summaries(std::int64_t epoch, int world_size,
                              std::vector<RankSummary> summaries,
                              std::vector<UnreadableRank> unreadable = {}, MergeWait wait = {});

}  // namespace fathom
