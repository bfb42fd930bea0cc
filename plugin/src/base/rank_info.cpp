#include <fathom/error.h>
#include <fathom/rank_info.h>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "base/terminal_text.h"

namespace fathom {
namespace {

// A whole number in [min, max], or fathom::Error naming the variable.
int parse_int(const char* variable, std::string_view value, int min, const char* fix) {
  int out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (value.empty() || ec != std::errc() || ptr != end || out < min)
    throw Error(fmt::format("{}='{}' is not a whole number >= {}; {}", variable,
                            detail::echoed_value(value), min, fix));
  return out;
}

}  // namespace

RankInfo parse_rank_info(const char* rank, const char* local_rank, const char* world_size) {
  constexpr const char* kFix =
      "the launcher (torchrun, srun, mpirun) sets it; unset it for a single process";
  RankInfo r;
  if (!rank && !world_size) {
    if (local_rank) r.local_rank = parse_int("LOCAL_RANK", local_rank, 0, kFix);
    return r;
  }
  if (!rank || !world_size)
    throw Error(
        fmt::format("{} is set but {} is not; a distributed job needs both (or neither, for "
                    "a single process)",
                    rank ? "RANK" : "WORLD_SIZE", rank ? "WORLD_SIZE" : "RANK"));
  r.world_size = parse_int("WORLD_SIZE", world_size, 1, kFix);
  r.rank = parse_int("RANK", rank, 0, kFix);
  if (r.rank >= r.world_size)
    throw Error(fmt::format("RANK={} is not below WORLD_SIZE={}; ranks run from 0 to WORLD_SIZE-1",
                            r.rank, r.world_size));
  r.local_rank = local_rank ? parse_int("LOCAL_RANK", local_rank, 0, kFix) : r.rank;
  if (r.local_rank >= r.world_size)
    throw Error(
        fmt::format("LOCAL_RANK={} is not below WORLD_SIZE={}", r.local_rank, r.world_size));
  return r;
}

RankInfo rank_from_environment() {
  return parse_rank_info(std::getenv("RANK"), std::getenv("LOCAL_RANK"), std::getenv("WORLD_SIZE"));
}

std::string rank_range_suffix(const RankInfo& r) {
  return r.distributed() ? fmt::format(" [rank {}]", r.rank) : std::string();
}

std::string rank_file_suffix(const RankInfo& r) {
  return r.distributed() ? fmt::format(".rank{}", r.rank) : std::string();
}

std::chrono::milliseconds merge_timeout_from_environment(std::chrono::milliseconds fallback) {
  const char* v = std::getenv("FATHOM_MERGE_TIMEOUT");
  if (!v) return fallback;
  char* end = nullptr;
  const double seconds = std::strtod(v, &end);
  if (!*v || *end || !std::isfinite(seconds) || seconds <= 0 || seconds > 86400)
    throw Error(
        fmt::format("FATHOM_MERGE_TIMEOUT='{}' is not a number of seconds in (0, 86400]; "
                    "e.g. FATHOM_MERGE_TIMEOUT=30",
                    detail::echoed_value(v)));
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000.0)));
}

}  // namespace fathom
