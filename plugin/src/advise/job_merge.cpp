#include <fathom/job_merge.h>
#include <fathom/job_report.h>
#include <fmt/format.h>

#include <algorithm>

#include "advise/job_findings.h"

namespace fathom {

JobEpoch merge_rank_summaries(std::int64_t epoch, int world_size,
                              std::vector<RankSummary> summaries,
                              std::vector<UnreadableRank> unreadable, MergeWait wait) {
  JobEpoch e;
  e.index = epoch;
  e.world_size = world_size;
  e.waited_ms = wait.waited_ms;
  e.merge_timeout_ms = wait.timeout_ms;
  std::vector<char> seen(static_cast<std::size_t>(std::max(world_size, 0)), 0);
  for (const UnreadableRank& u : unreadable)
    if (u.rank >= 0 && u.rank < world_size) seen[static_cast<std::size_t>(u.rank)] = 2;
  e.unreadable = std::move(unreadable);
  e.ranks.reserve(summaries.size());
  for (RankSummary& s : summaries) {
    const int r = s.rank.rank;
    if (r < 0 || r >= world_size || s.epoch != epoch || s.rank.world_size != world_size) {
      e.unreadable.push_back(
          {r, fmt::format("summary of rank {} of {} for epoch {} does not belong "
                          "to epoch {} of a job of {} ranks",
                          r, s.rank.world_size, s.epoch, epoch, world_size)});
      continue;
    }
    if (seen[static_cast<std::size_t>(r)]) continue;
    seen[static_cast<std::size_t>(r)] = 1;
    e.ranks.push_back(std::move(s));
  }
  std::sort(e.ranks.begin(), e.ranks.end(),
            [](const RankSummary& a, const RankSummary& b) { return a.rank.rank < b.rank.rank; });
  for (int r = 0; r < world_size; ++r)
    if (seen[static_cast<std::size_t>(r)] != 1) e.missing_ranks.push_back(r);

  // Ranks that ran no step say nothing about speed.
  std::vector<const RankSummary*> timed;
  for (const RankSummary& s : e.ranks)
    if (s.steps > 0) timed.push_back(&s);
  if (!timed.empty()) {
    e.work_from_comm = std::any_of(timed.begin(), timed.end(), [](const RankSummary* s) {
      return s->comm.source != CommSource::None;
    });
    e.work_is_median = std::all_of(timed.begin(), timed.end(), [](const RankSummary* s) {
      return s->work_ms_median.has_value();
    });
    auto by_work = [](const RankSummary* a, const RankSummary* b) {
      return a->work_ms() < b->work_ms();
    };
    std::sort(timed.begin(), timed.end(), by_work);
    const RankSummary* fastest = timed.front();
    const RankSummary* slowest = timed.back();
    e.fastest_rank = fastest->rank.rank;
    e.slowest_rank = slowest->rank.rank;
    e.work_ms_fastest = fastest->work_ms();
    e.work_ms_slowest = slowest->work_ms();
    const std::size_t n = timed.size();
    e.work_ms_median = n % 2 ? timed[n / 2]->work_ms()
                             : 0.5 * (timed[n / 2 - 1]->work_ms() + timed[n / 2]->work_ms());
    e.skew_ms = e.work_ms_slowest - e.work_ms_fastest;
    e.skew_share = e.work_ms_fastest > 0 ? e.skew_ms / e.work_ms_fastest : 0.0;
  }
  e.findings = find_cross_rank_issues(e);
  return e;
}

}  // namespace fathom
