#pragma once
// What the device meter needs from a device's caching allocator: its counters, and a reading at
// every allocation and free. Nothing here can reset the allocator's statistics, on purpose:
// they are the user's (torch.cuda.max_memory_allocated). The CUDA caching allocator's version is
// cuda_allocator_access.h; tests pass a fake.
#include <memory>
#include <optional>
#include <string>

#include "aggregate/memory_peak_tracker.h"

namespace fathom::detail {

// Stops a follow() when destroyed; once the destructor returns, the allocator no longer
// touches the tracker.
class AllocatorFollow {
 public:
  virtual ~AllocatorFollow() = default;
};

struct FollowResult {
  std::unique_ptr<AllocatorFollow> follow;  // null when the allocator cannot be followed
  std::string why_not;                      // then: why, for the report's "not measured"
};

class AllocatorAccess {
 public:
  virtual ~AllocatorAccess() = default;
  virtual int device() const noexcept = 0;  // the index its readings carry
  // The device's counters now (reading them changes nothing); nullopt when they cannot be read.
  virtual std::optional<AllocatorReading> read() noexcept = 0;
  // Hands tracker a reading at every allocation and free on its device, from the thread that
  // allocates, until the returned follow is destroyed (which must happen before tracker's end).
  virtual FollowResult follow(MemoryPeakTracker& tracker) noexcept = 0;
};

}  // namespace fathom::detail
