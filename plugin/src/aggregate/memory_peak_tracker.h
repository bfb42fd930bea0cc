#pragma once
// Device-memory peaks per interval (a phase, the gap between two steps, an epoch), worked out
// from the caching allocator's running counters instead of its peak counters: those belong to
// the user (torch.cuda.max_memory_allocated, getDeviceStats) and fathom never resets them.
//
// The allocator hands the tracker a reading at every allocation and free (its trace callback,
// hooks/src/measure/cuda_allocator_access.cpp); open() and close() take one more at each
// boundary. Torch-free: the adapter turns c10's DeviceStats into AllocatorReadings, tests make them
// up.
#include <fathom/records.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>

namespace fathom {

// One device's allocator counters at one moment, summed over its pools.
struct AllocatorReading {
  int device = 0;
  std::int64_t allocated = 0;        // bytes in blocks handed out now
  std::int64_t allocated_total = 0;  // bytes ever handed out (zeroed by resetAccumulatedStats)
  std::int64_t freed_total = 0;      // bytes ever taken back (zeroed with allocated_total)
  std::int64_t reserved = 0;         // bytes held from the driver now
  std::int64_t alloc_retries = 0;    // cumulative, like the two below it
  std::int64_t ooms = 0;
};

// Thread-safe: observe() runs on whichever thread allocates (under that device's allocator
// lock), open() and close() on the training thread. Nothing here allocates or throws.
class MemoryPeakTracker {
 public:
  static constexpr int kMaxOpen = 16;  // intervals open at once: epoch, gap, nested phases

  explicit MemoryPeakTracker(int device) noexcept : device_(device) {}
  MemoryPeakTracker(const MemoryPeakTracker&) = delete;
  MemoryPeakTracker& operator=(const MemoryPeakTracker&) = delete;

  int device() const noexcept { return device_; }

  // A reading taken by the allocator as it hands out or takes back memory, in its own order
  // (readings of other devices are ignored). c10's allocator takes the reading of an
  // allocation before counting it and that of a free after, so between two readings the
  // counters first rise by at most one block and then fall by at most one: the highest point
  // is the first reading plus what was handed out in between.
  void observe(const AllocatorReading& r) noexcept;

  // Starts an interval at now, a reading the caller just took; returns its id, or -1 when
  // kMaxOpen are open or now is another device's.
  int open(const AllocatorReading& now) noexcept;
  // Ends it at now and returns its peaks, retries and OOMs; nullopt for an id that is not open.
  std::optional<DeviceMemoryPeak> close(int interval, const AllocatorReading& now) noexcept;
  // Ends it at the last reading the tracker saw (when the caller could not take one).
  std::optional<DeviceMemoryPeak> close(int interval) noexcept;

 private:
  struct Interval {
    bool open = false;
    std::int64_t peak_allocated = 0;
    std::int64_t peak_reserved = 0;
    std::int64_t retries_at_open = 0;
    std::int64_t ooms_at_open = 0;
  };

  void apply(const AllocatorReading& r, bool boundary) noexcept;
  void fold(std::int64_t allocated, std::int64_t reserved) noexcept;
  std::optional<DeviceMemoryPeak> finish(int interval) noexcept;

  const int device_;
  std::mutex mutex_;
  std::optional<AllocatorReading> last_;  // the newest reading applied
  std::array<Interval, kMaxOpen> intervals_{};
};

}  // namespace fathom
