#pragma once
// The job report: every rank's epoch side by side, merged on rank 0. It names the slowest rank
// and the skew, shows communication and memory per rank, lists the ranks that never reported,
// and holds the findings that only show across ranks (a straggler, one rank waiting on data,
// uneven load). Schema and definitions: docs/distributed.md.
#include <fathom/rank_summary.h>
#include <fathom/report.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace fathom {

inline constexpr int kJobReportSchemaVersion = 1;

// A rank whose summary arrived but could not be read.
struct UnreadableRank {
  int rank = 0;
  std::string why;
};

struct JobEpoch {
  std::int64_t index = 0;
  int world_size = 1;
  std::vector<RankSummary> ranks;  // by rank; only the ranks that reported
  std::vector<int> missing_ranks;  // never reported within the timeout (or unreadable)
  std::vector<UnreadableRank> unreadable;
  double waited_ms = 0;                          // how long rank 0 waited for the others
  std::optional<std::int64_t> merge_timeout_ms;  // how long it would have waited at most

  // Over the reporting ranks. "Work" is step time less communication wait (rank_summary.h);
  // it falls back to step time when no rank measured its communication.
  bool work_from_comm = false;
  bool work_is_median = false;  // every timed rank sent its median work per step
  std::optional<int> slowest_rank;
  std::optional<int> fastest_rank;
  double work_ms_slowest = 0;
  double work_ms_fastest = 0;
  double work_ms_median = 0;
  double skew_ms = 0;     // slowest - fastest, per step
  double skew_share = 0;  // skew_ms / fastest work
  std::vector<Finding> findings;
};

struct JobReport {
  int schema_version = kJobReportSchemaVersion;
  std::string run_name;
  int world_size = 1;
  std::vector<JobEpoch> epochs;
};

// How long rank 0 waited for the other ranks' summaries, known before the merge so that its
// findings carry it (the "distributed.missing_ranks" evidence).
struct MergeWait {
  double waited_ms = 0;
  std::optional<std::int64_t> timeout_ms;
};

}  // namespace fathom
