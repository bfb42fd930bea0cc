#pragma once
// What one rank sends rank 0 at each epoch end: a compact, fixed-layout summary of the epoch
// (step and phase times, communication, memory, data wait, top findings). Serialized to at most
// kMaxRankSummaryBytes, so 1,000 ranks send rank 0 well under half a megabyte per epoch
// (analyze/summarize_rank.h makes it; formats/rank_summary_bytes.h is the wire format).
#include <fathom/comm_stats.h>
#include <fathom/phase.h>
#include <fathom/rank_info.h>
#include <fathom/report.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fathom {

struct RankFinding {
  std::string id;  // a single-rank finding's id, e.g. "data.loader_bound"; at most 40 bytes
  Severity severity = Severity::Info;
};

inline constexpr std::size_t kRankSummaryHostBytes = 32;
inline constexpr std::size_t kRankSummaryFindingIdBytes = 40;
inline constexpr std::size_t kRankSummaryTopFindings = 3;

struct RankSummary {
  RankInfo rank;
  std::int64_t epoch = 0;
  std::string host;  // at most kRankSummaryHostBytes
  std::int64_t pid = 0;
  std::int64_t steps = 0;
  std::int64_t failed_steps = 0;
  std::int64_t samples = 0;
  double wall_ms = 0;
  double step_ms_total = 0;
  double step_ms_max = 0;
  std::array<double, kPhaseCount> phase_ms{};  // totals over the epoch
  CommStats comm;
  // The median over the epoch's steps of step time less that step's communication wait, when
  // the rank measured it per step (fathom's distributed extension does).
  std::optional<double> work_ms_median;
  std::optional<std::int64_t> device_peak_allocated_bytes;
  std::optional<std::int64_t> device_peak_reserved_bytes;
  std::optional<std::int64_t> peak_rss_bytes;
  bool ended_by_exception = false;
  std::vector<RankFinding> top_findings;  // the most severe, at most kRankSummaryTopFindings

  double per_step(double total) const noexcept { return steps ? total / steps : 0.0; }
  double step_ms_mean() const noexcept { return per_step(step_ms_total); }
  double data_ms_mean() const noexcept { return per_step(phase_ms[0]); }
  double comm_exposed_ms_mean() const noexcept { return per_step(comm.exposed_ms); }
  // The time a rank spent on its own work per step: step time less the time it waited for
  // communication. A synchronous all-reduce evens step times out across ranks (the fast ones
  // wait for the slow one inside the collective), so stragglers show here, not in step time.
  double work_ms_mean() const noexcept { return per_step(step_ms_total - comm.exposed_ms); }
  // What ranks are compared on: the median when measured (a warm-up step or one hiccup does not
  // count), else the mean.
  double work_ms() const noexcept { return work_ms_median ? *work_ms_median : work_ms_mean(); }
};

// Version 1 layout, little-endian: magic "FTRS", version, flags, then fixed fields, the host and
// up to three finding ids (docs/distributed.md). The most it can take:
inline constexpr std::size_t kRankSummaryFixedBytes =
    4 + 1 + 1 + 3 * 4 + 8 + 8 + 3 * 8 + 3 * 8 + kPhaseCount * 8 + 1 + 2 * 8 + 2 * 8 + 8 + 3 * 8;
inline constexpr std::size_t kMaxRankSummaryBytes =
    kRankSummaryFixedBytes + 1 + kRankSummaryHostBytes + 1 +
    kRankSummaryTopFindings * (1 + 1 + kRankSummaryFindingIdBytes);

}  // namespace fathom
