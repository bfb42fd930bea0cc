#pragma once
// The GPU timeline: how much of the window each device was busy, why it was idle (data loading,
// host synchronizations, launches that came too late), how many kernels were tiny, and how much
// of the communication (NCCL) ran while compute kernels ran.
#include <fathom/gpu_aggregator.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace fathom {

struct DeviceTimeline {
  std::int32_t device = 0;
  std::int64_t busy_ns = 0;
  std::int64_t idle_ns = 0;
  std::optional<double> busy_share;  // of the window
  IdleStats idle;                    // idle_ns split; the parts add up to idle_ns
  std::int64_t kernel_ns = 0;        // union of kernel intervals
  std::int64_t communication_ns = 0;
  std::int64_t communication_overlap_ns = 0;          // communication while compute kernels ran
  std::optional<double> communication_overlap_share;  // of communication_ns
};

struct TimelineResult {
  std::vector<DeviceTimeline> devices;
  std::int64_t window_ns = 0;
  bool window_from_steps = false;
  std::int64_t steps = 0;

  std::int64_t kernel_count = 0;
  std::int64_t tiny_kernel_count = 0;  // shorter than thresholds::kTinyKernelNs
  std::int64_t tiny_kernel_ns = 0;
  std::optional<double> tiny_count_share;  // of kernel_count
  std::optional<double> tiny_time_share;   // of kernel time

  std::int64_t communication_kernels = 0;
  std::int64_t communication_ns = 0;  // sum over NCCL kernels
  std::optional<double>
      communication_share;  // union of communication / window, summed over devices

  // The host side: kernel launches and calls that block the host until the GPU catches up.
  std::int64_t launch_calls = 0;
  std::int64_t sync_calls = 0;  // runtime calls (cuda*Synchronize, synchronous cudaMemcpy)
  std::int64_t sync_call_ns = 0;
  std::int64_t sync_records = 0;  // CUPTI / Kineto synchronization records (host-blocking kinds)
  std::int64_t sync_record_ns = 0;
  bool launches_recorded = false;  // without runtime calls, late launches cannot be told apart
  std::int64_t late_records = 0;
};

TimelineResult analyze_timeline(const GpuAggregate& a);

}  // namespace fathom
