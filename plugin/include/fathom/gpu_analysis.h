#pragma once
// What the GPU analyses found, as the report holds it: Tensor Core use, host-device transfers and
// the timeline (busy, idle and why, tiny kernels, communication overlap). Plain data; the analyses
// that fill it from an aggregate (plugin/src/analyze) are internal.
//
// Tensor Core use: the share of compute-kernel time spent in Tensor Core kernels (overall and per
// phase), how each kernel's unit was decided (by its name, by the op that launched it, or not at
// all: unknown is its own class, never counted as CUDA cores), which kernel families the time went
// to, and the Tensor-Core-eligible ATen ops (GEMMs, convolutions, attention) whose kernels all ran
// on CUDA cores, or whose shapes keep them off Tensor Cores.
//
// Copies between host and device: bytes, time and achieved bandwidth per direction against the
// link's theoretical peak, pageable vs pinned host memory, synchronous vs asynchronous calls,
// the share of the window they occupy and how much of them ran while kernels ran.
//
// The GPU timeline: how much of the window each device was busy, why it was idle (data loading,
// host synchronizations, launches that came too late), how many kernels were tiny, and how much
// of the communication (NCCL) ran while compute kernels ran.
#include <fathom/gpu_records.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fathom {

// The GPU's idle time, by what the host was doing when the GPU ran out of work.
struct IdleStats {
  std::int64_t data_wait_ns = 0;  // the host was in a data-loading phase
  std::int64_t sync_ns = 0;  // the host was blocked in a synchronization when the GPU went idle
  std::int64_t host_launch_ns = 0;  // the next work was launched only after the GPU went idle
  std::int64_t other_ns = 0;        // none of these could be shown from the records
  std::int64_t gaps = 0;
};

struct PhaseTensorCores {
  std::string phase;           // phase_name(), or "unattributed"
  std::int64_t kernel_ns = 0;  // compute kernels (communication left out)
  std::int64_t tensor_core_ns = 0;
  std::optional<double> share;  // tensor_core_ns / kernel_ns; null without kernel time
  std::int64_t unknown_ns = 0;  // kernels neither the name nor the op decided
};

struct KernelFamilyTime {
  std::string family;  // kernel_classifier's row id
  bool tensor_core = false;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  std::string decision = "name";          // "name", or "unknown" (no row names the kernels)
  std::int64_t tensor_core_by_op_ns = 0;  // of an unknown family, the launches an op decided
};

struct TopKernel {
  std::string name;
  std::string family;
  bool tensor_core = false;
  bool communication = false;
  std::string precision;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  std::string decision = "name";  // "name" or "unknown", as for families
  std::int64_t tensor_core_by_op_ns = 0;
};

// Kernel count and time of one way of deciding.
struct DecidedTime {
  std::int64_t count = 0;
  std::int64_t ns = 0;
};

// Compute kernels by how their unit was decided; the four add up to kernel_count / kernel_ns.
struct TensorCoreDecisions {
  DecidedTime tensor_cores_by_name;
  DecidedTime cuda_cores_by_name;
  DecidedTime tensor_cores_by_op;  // undecided names, launched by a 16- / 8-bit eligible op, sm_80+
  DecidedTime unknown;
  // Of unknown: fused-attention kernels whose architecture neither the name nor the source gave.
  DecidedTime unknown_without_capability;
};

struct EligibleOp {
  std::string op;
  std::string shapes;
  std::string dtypes;
  std::string misaligned;  // dims that are not multiples of 8, "" if none
  std::int64_t instances = 0;
  std::int64_t only_cuda_cores = 0;  // instances whose kernels all ran on CUDA cores
  std::int64_t tensor_core_ns = 0;
  std::int64_t cuda_core_ns = 0;
};

struct TensorCoreResult {
  std::int64_t kernel_count = 0;  // compute kernels
  std::int64_t kernel_ns = 0;
  std::int64_t tensor_core_count = 0;  // by name and by op
  std::int64_t tensor_core_ns = 0;
  std::optional<double> share;  // of compute-kernel time; null without any; a lower bound when
                                // some of it is unknown
  TensorCoreDecisions decisions;
  std::optional<double> unknown_share;     // decisions.unknown.ns / kernel_ns
  bool op_dtypes_recorded = false;         // eligible ops carried input types: ops could decide
  std::vector<PhaseTensorCores> phases;    // phases with kernel time, then "unattributed"
  std::vector<KernelFamilyTime> families;  // by time, most first
  std::vector<TopKernel> top_kernels;      // by time, at most kTopKernels

  // Eligible ops, when the source recorded ATen ops (a Kineto trace, fathom's op hooks).
  bool ops_recorded = false;
  std::int64_t eligible_instances = 0;
  std::int64_t eligible_with_kernels = 0;
  std::int64_t eligible_only_cuda_cores = 0;
  std::int64_t eligible_cuda_core_ns = 0;  // kernel time of eligible ops on CUDA cores
  std::int64_t eligible_unknown_ns = 0;    // ... in kernels neither name nor op decided
  std::vector<EligibleOp> on_cuda_cores;   // by CUDA core time, most first, at most kTopOps
  std::vector<EligibleOp> misaligned;  // shapes not multiples of 8, by instances, at most kTopOps
};

inline constexpr std::size_t kTopKernels = 10;
inline constexpr std::size_t kTopOps = 10;
// Above this share of compute-kernel time in unknown kernels the report says how to decide them
// (docs/thresholds.md).
inline constexpr double kUnknownShareNotable = 0.10;

// The host-device link, where known (NVML, the device, or the user). Unknown: a reason instead.
struct LinkPeak {
  std::optional<double> gb_per_s;
  std::string description;  // "PCIe gen4 x16", or why it is not known
};

struct TransferRow {
  MemcpyKind direction = MemcpyKind::Unknown;
  MemoryKind host_memory = MemoryKind::Unknown;  // the host side (HtoD: source, DtoH: destination)
  bool async = false;
  bool async_known = true;  // false: the launching calls were not recorded (neither sync nor async)
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
  std::int64_t unknown_call_count = 0, unknown_call_bytes = 0;  // no launching call recorded
  std::optional<double> gb_per_s;
  std::optional<double> share_of_peak;
};

// Copies by the phase that launched them.
struct PhaseTransfers {
  std::string phase;  // phase_name(), or "unattributed"
  std::int64_t count = 0;
  std::int64_t bytes = 0;
  std::int64_t total_ns = 0;
};

struct TransferResult {
  std::vector<TransferDirection> directions;  // in MemcpyKind order
  std::vector<TransferRow> rows;              // direction x host memory x async
  std::vector<PhaseTransfers> phases;         // phases with copies, then "unattributed"
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

// One training step's GPU work (`fathom analyze`): what its thread launched while the step was
// open (by the launch's host time), and how busy the devices were inside its wall-clock window.
struct StepGpu {
  std::string name;  // "step 12", "ProfilerStep#3"
  std::int64_t wall_ns = 0;
  std::int64_t kernel_count = 0;
  std::int64_t kernel_ns = 0;  // compute kernels (communication left out)
  std::int64_t tensor_core_ns = 0;
  std::optional<double> tensor_core_share;  // of kernel_ns
  std::int64_t communication_ns = 0;
  std::int64_t memcpy_count = 0;
  std::int64_t memcpy_bytes = 0;
  std::int64_t memcpy_ns = 0;
  std::int64_t busy_ns = 0;          // union of GPU work inside the window, summed over devices
  std::int64_t idle_ns = 0;          // window minus busy, for one device (an analysis per device)
  std::optional<double> busy_share;  // busy_ns / wall_ns, for one device
};

}  // namespace fathom
