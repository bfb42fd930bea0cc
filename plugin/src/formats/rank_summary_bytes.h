#pragma once
// The rank summary (fathom/rank_summary.h) as the bytes a rank sends rank 0.
#include <fathom/rank_summary.h>

#include <cstdint>
#include <span>
#include <vector>

namespace fathom {

std::vector<std::uint8_t> serialize_rank_summary(const RankSummary& s);
// Throws fathom::Error naming what is wrong (bad magic, unknown version, truncated) when bytes
// are not a summary this version of fathom wrote.
RankSummary parse_rank_summary(std::span<const std::uint8_t> bytes);

}  // namespace fathom
