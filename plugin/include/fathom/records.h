#pragma once
// Plain records that the hooks (or a replay) hand to the core. No torch, no vendor types.
#include <fathom/phase.h>

#include <cstdint>
#include <optional>
#include <string>

namespace fathom {

// Peak figures of the device's caching allocator over one interval (a phase, a step, an epoch).
struct DeviceMemoryPeak {
  std::int64_t peak_allocated_bytes = 0;
  std::int64_t peak_reserved_bytes = 0;
  std::int64_t alloc_retries = 0;  // cudaMalloc retries after freeing cached blocks
  std::int64_t ooms = 0;           // out-of-memory errors the allocator raised
};

// One phase of one step as measured on the host (and, where present, on the device).
struct PhaseRecord {
  Phase phase = Phase::Forward;
  std::int64_t step = 0;      // step index within the epoch
  std::int64_t begin_ns = 0;  // steady clock
  std::int64_t end_ns = 0;
  std::optional<double> device_ms;                // CUDA-event time on the current stream
  std::optional<DeviceMemoryPeak> device_memory;  // caching-allocator peaks during the phase
  std::optional<std::int64_t> rss_bytes;          // process resident memory at phase end (CPU)
  bool aborted = false;                           // left by an exception
  bool inferred = false;  // data phase taken as the gap between two steps (no explicit scope)
};

enum class CopyDirection : std::uint8_t { HostToDevice, DeviceToHost, DeviceToDevice, HostToHost };
std::string_view copy_direction_name(CopyDirection d) noexcept;

// A copy made through fathom's copy helper, as seen from the host.
struct CopyRecord {
  CopyDirection direction = CopyDirection::HostToDevice;
  std::int64_t bytes = 0;
  bool pinned = false;        // host side was page-locked (pinned) memory
  bool non_blocking = false;  // asked for an asynchronous copy
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t step = 0;
};

struct StepRecord {
  std::int64_t index = 0;
  std::int64_t samples = 0;
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  bool failed = false;  // left by an exception
};

// The most samples one step may count: far above any batch (2^40, about 1.1e12), and low enough
// that an epoch's sum of them stays far from overflowing.
inline constexpr std::int64_t kMaxStepSamples = std::int64_t{1} << 40;
// Throws fathom::Error unless 0 <= samples <= kMaxStepSamples: a negative count (a size read as
// -1) or one near the int64 limit would reach the report as a negative or wrapped throughput.
void check_step_samples(std::int64_t samples);

}  // namespace fathom
