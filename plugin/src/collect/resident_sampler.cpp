#include "collect/resident_sampler.h"

#include "collect/process_memory.h"

namespace fathom {

std::optional<std::int64_t> ResidentSampler::at(std::int64_t now_ns) noexcept {
  const std::int64_t last = last_ns_.load(std::memory_order_relaxed);
  // A clock that went back (another thread's earlier now_ns) also reuses the reading.
  if (last != std::numeric_limits<std::int64_t>::min() && now_ns - last < kIntervalNs) {
    const std::int64_t b = bytes_.load(std::memory_order_relaxed);
    return b >= 0 ? std::optional<std::int64_t>(b) : std::nullopt;
  }
  const std::optional<std::int64_t> read = current_rss_bytes();
  bytes_.store(read.value_or(-1), std::memory_order_relaxed);
  last_ns_.store(now_ns, std::memory_order_relaxed);
  readings_.fetch_add(1, std::memory_order_relaxed);
  return read;
}

}  // namespace fathom
