#pragma once
// Every threshold the advisor uses, in one place, with where it comes from.
#include <cstdint>

namespace fathom::thresholds {

// PyTorch profiler's rule: data loading above 5% of step time is worth more workers / prefetch.
inline constexpr double kDataShareOfStep = 0.05;
// Caching-allocator peak above 90% of device memory: the next larger batch or model will not fit.
inline constexpr double kDeviceMemoryShare = 0.90;
// Nsight Systems' rule: any asynchronous copy from pageable memory should use pinned memory.
inline constexpr std::int64_t kPageableAsyncCopies = 1;
// Synchronous host-to-device copies larger than this stall the host for the whole transfer.
inline constexpr std::int64_t kSyncCopyBytes = 64 * 1024;
// Step time spent outside any phase scope above this share is reported as unaccounted.
inline constexpr double kUnaccountedShareOfStep = 0.10;

}  // namespace fathom::thresholds
