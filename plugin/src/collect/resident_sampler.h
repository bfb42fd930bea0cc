#pragma once
// The process's resident memory at phase ends, sampled: a phase that ends within kIntervalNs of the
// last reading reports that reading instead of reading /proc again. Reading /proc/self/statm costs
// about a microsecond (the kernel formats the line), which on a 27 us CPU step with five phase ends
// was a quarter of the step; sampled, a phase end costs a compare, and the readings cost at most
// 1 us per kIntervalNs (0.1%). What the report's RSS column then means: the largest resident memory
// read at a phase end, each reading at most kIntervalNs older than the phase end it stands for;
// phases longer than the interval each get a reading of their own, as before.
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>

namespace fathom {

class ResidentSampler {
 public:
  static constexpr std::int64_t kIntervalNs = 1'000'000;  // 1 ms

  // The reading for a phase that ends at now_ns (fathom::now_ns()); nullopt where /proc cannot be
  // read. Safe from any thread; concurrent callers may both read.
  std::optional<std::int64_t> at(std::int64_t now_ns) noexcept;
  // Readings taken from /proc so far (tests, benchmarks).
  std::int64_t readings() const noexcept { return readings_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> last_ns_{std::numeric_limits<std::int64_t>::min()};
  std::atomic<std::int64_t> bytes_{-1};  // -1: the last reading failed
  std::atomic<std::int64_t> readings_{0};
};

}  // namespace fathom
