#pragma once
// The communication a rank's training loop launched, as the host sees it: each collective's
// interval from launch to completion, and the time the training thread blocked waiting for one.
// Busy time is the union of the intervals (buckets in flight together count once); exposed time
// is the blocked time, the part compute did not hide. Completions arrive on the backend's own
// threads, hence the lock; memory stays bounded however many collectives an epoch launches.
#include <fathom/comm_stats.h>

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace fathom {

class CommLedger {
 public:
  // Intervals kept before they are folded into the busy total (a fold loses only the overlap
  // between collectives on either side of it).
  static constexpr std::size_t kMaxPending = 4096;

  void add_collective(std::int64_t begin_ns, std::int64_t end_ns, std::int64_t bytes) noexcept;
  void add_wait(std::int64_t ns) noexcept;
  // The wait recorded since the last take (a step's share is the difference across it).
  std::int64_t waited_ns() noexcept;
  // Everything recorded since the last take. source is None when nothing was recorded.
  CommStats take() noexcept;

 private:
  void fold() noexcept;  // with mutex_ held

  std::mutex mutex_;
  std::vector<std::pair<std::int64_t, std::int64_t>> pending_;
  std::int64_t busy_ns_ = 0;
  std::int64_t wait_ns_ = 0;
  std::int64_t collectives_ = 0;
  std::int64_t bytes_ = 0;
  std::int64_t waits_ = 0;
};

}  // namespace fathom
