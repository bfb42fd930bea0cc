#pragma once
// Where this process sits in a distributed job: its rank, its rank on this host, and how many
// ranks there are. torchrun and most cluster launchers export RANK, LOCAL_RANK and WORLD_SIZE;
// a process group handed to fathom says the same (hooks/include/fathom/distributed.h).
#include <chrono>
#include <string>

namespace fathom {

struct RankInfo {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;

  bool distributed() const noexcept { return world_size > 1; }
  friend bool operator==(const RankInfo&, const RankInfo&) = default;
};

// Reads RANK, LOCAL_RANK and WORLD_SIZE. None set: a single process (0, 0, 1). Throws
// fathom::Error naming the variable, its value and the fix when one is not a number, when RANK
// is outside [0, WORLD_SIZE), or when only some of RANK / WORLD_SIZE are set.
RankInfo rank_from_environment();
// The same rules over given values (null = unset), for tests and other sources.
RankInfo parse_rank_info(const char* rank, const char* local_rank, const char* world_size);

// " [rank 3]" in a distributed job, "" otherwise: appended to NVTX epoch and step labels so
// Nsight Systems' multi-process view reads apart.
std::string rank_range_suffix(const RankInfo& r);
// ".rank3" in a distributed job, "" otherwise: inserted before a report file's extension.
std::string rank_file_suffix(const RankInfo& r);

// How long rank 0 waits at an epoch end for the other ranks' summaries: FATHOM_MERGE_TIMEOUT
// (seconds, e.g. "30" or "2.5") when set, else fallback. Throws fathom::Error on a bad value.
std::chrono::milliseconds merge_timeout_from_environment(std::chrono::milliseconds fallback);

}  // namespace fathom
