#pragma once
// Copies between host and device: bytes, time and achieved bandwidth per direction against the
// link's theoretical peak, pageable vs pinned host memory, synchronous vs asynchronous calls,
// the share of the window they occupy and how much of them ran while kernels ran.
#include <fathom/gpu_records.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fathom {

struct GpuAggregate;

// The theoretical one-direction bandwidth of a PCIe link, GB/s (10^9 bytes), after line coding:
// gen1/2 8b/10b, gen3-5 128b/130b, gen6 FLIT. nullopt for a generation or width it does not know.
std::optional<double> pcie_peak_gb_per_s(int generation, int width) noexcept;

// The host-device link, where known (NVML, the device, or the user). Unknown: a reason instead.
struct LinkPeak {
  std::optional<double> gb_per_s;
  std::string description;  // "PCIe gen4 x16", or why it is not known
};

struct TransferRow {
  MemcpyKind direction = MemcpyKind::Unknown;
  MemoryKind host_memory = MemoryKind::Unknown;  // the host side (HtoD: source, DtoH: destination)
  bool async = false;
  std::int64_t count = 0;
  std::int64_t bytes = 0;
  std::int64_t total_ns = 0;
  std::optional<double> gb_per_s;       // bytes / time
  std::optional<double> share_of_peak;  // host <-> device rows, when the peak is known
};

struct TransferDirection {
  MemcpyKind direction = MemcpyKind::Unknown;
  std::int64_t count = 0;
  std::int64_t bytes = 0;
  std::int64_t total_ns = 0;
  std::int64_t pageable_count = 0, pageable_bytes = 0;
  std::int64_t pinned_count = 0, pinned_bytes = 0;
  std::int64_t sync_count = 0, sync_bytes = 0;
  std::int64_t async_count = 0, async_bytes = 0;
  std::optional<double> gb_per_s;
  std::optional<double> share_of_peak;
};

struct TransferResult {
  std::vector<TransferDirection> directions;  // in MemcpyKind order
  std::vector<TransferRow> rows;              // direction x host memory x async
  LinkPeak link;
  std::int64_t count = 0;
  std::int64_t bytes = 0;
  std::int64_t total_ns = 0;  // sum of copy durations
  std::int64_t busy_ns = 0;   // union of copy intervals (concurrent copies once)
  std::int64_t overlap_with_kernels_ns = 0;
  std::optional<double> overlap_share;  // of busy_ns
  std::int64_t window_ns = 0;
  std::optional<double> share_of_window;  // busy_ns / window (the steps when there are any)
  // What the advisor's transfer rules look at.
  std::int64_t pageable_async_count = 0;  // async API calls on pageable memory: really synchronous
  std::int64_t large_sync_h2d_count = 0;  // synchronous host-to-device copies above kSyncCopyBytes
};

TransferResult analyze_transfers(const GpuAggregate& a, const LinkPeak& link = {});

std::string_view memcpy_kind_name(MemcpyKind k) noexcept;  // "HtoD", "DtoH", "DtoD", ...
std::string_view memory_kind_name(MemoryKind k) noexcept;  // "pageable", "pinned", "device", ...

}  // namespace fathom
