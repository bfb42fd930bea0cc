#pragma once
// How the ranks' epoch summaries reach rank 0: through the job's c10d store, one key per rank
// and epoch plus a counter. A rank posts and goes on (it never waits for another rank); rank 0
// polls the counter until every rank has posted or the timeout passes, then reads what is
// there. A dead or hung rank costs rank 0 the timeout, nothing more, and leaves the process
// group untouched (docs/distributed.md says why this is not a gather).
#include <fathom/rank_info.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace fathom::detail {

struct Gathered {
  std::vector<std::pair<int, std::vector<std::uint8_t>>>
      payloads;  // (rank, bytes), rank 0 excluded
  double waited_ms = 0;
  std::string error;  // the store failed (rank 0 then reports every other rank missing)
};

class SummaryExchange {
 public:
  // prefix: keys live under it, so two sessions (or a restarted job) never read each other.
  SummaryExchange(c10::intrusive_ptr<c10d::Store> store, RankInfo rank,
                  std::chrono::milliseconds timeout, std::string prefix);

  // A non-zero rank's summary for epoch. Returns the store's error, empty on success.
  std::string post(std::int64_t epoch, const std::vector<std::uint8_t>& bytes) noexcept;
  // Rank 0: the other ranks' summaries for epoch, as many as arrived within the timeout. The keys
  // read are deleted so the store does not grow with the run.
  Gathered gather(std::int64_t epoch) noexcept;

  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

 private:
  std::string key(std::int64_t epoch, int rank) const;
  std::string counter(std::int64_t epoch) const;

  c10::intrusive_ptr<c10d::Store> store_;
  RankInfo rank_;
  std::chrono::milliseconds timeout_;
  std::string prefix_;
};

}  // namespace fathom::detail
