#pragma once
// A rank's epoch as it travels to rank 0: the report's epoch cut to the fixed summary.
#include <fathom/comm_stats.h>
#include <fathom/rank_info.h>
#include <fathom/rank_summary.h>
#include <fathom/report.h>

#include <cstdint>
#include <optional>
#include <string>

namespace fathom {

// Strings longer than their field are cut.
RankSummary summarize_rank(const EpochSummary& epoch, const RankInfo& rank, const CommStats& comm,
                           const std::string& host, std::int64_t pid,
                           std::optional<double> work_ms_median = std::nullopt);

}  // namespace fathom
