#pragma once
// Online, bounded aggregation of GPU activity. Records go in one at a time (or a GpuActivity
// batch, as the CUPTI collector delivers them); what is kept grows with the number of distinct
// kernel names, copy kinds and Tensor-Core-eligible op shapes, not with launches. Records that
// need their neighbours in time (the busy/idle timeline, overlaps, attribution to the op and
// phase that launched them) are held in a bounded window and swept at flush(): the session calls
// it at step ends, and add() sweeps by itself when the window is full.
//
// Not synchronized: one thread at a time (the collector delivers on the flushing thread).
// add() never throws; a record that cannot be kept (out of memory) is counted as dropped.
#include <fathom/gpu_analysis.h>
#include <fathom/gpu_records.h>
#include <fathom/phase.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aggregate/kernel_classifier.h"

namespace fathom {

// Per-phase buckets: the five phases, then work no phase could be found for.
inline constexpr std::size_t kPhaseBuckets = kPhaseCount + 1;
inline constexpr std::size_t kUnattributed = kPhaseCount;

struct KernelStats {
  std::string name;
  KernelClass kind;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t min_ns = 0;
  std::int64_t max_ns = 0;
  std::int64_t tiny_count = 0;  // shorter than thresholds::kTinyKernelNs
  std::int64_t tiny_ns = 0;
  // Launches of a kernel the name leaves undecided that the launching op decided: Tensor Cores
  // (tensor_core_by_op). The rest of an undecided kernel's launches stay unknown.
  std::int64_t tensor_core_by_op_count = 0;
  std::int64_t tensor_core_by_op_ns = 0;
};

struct MemcpyStats {
  MemcpyKind kind = MemcpyKind::Unknown;
  MemoryKind src = MemoryKind::Unknown;
  MemoryKind dst = MemoryKind::Unknown;
  bool async = false;
  bool async_known = true;  // the launching calls were recorded
  std::int64_t count = 0;
  std::int64_t bytes = 0;
  std::int64_t total_ns = 0;
  std::int64_t large_count = 0;  // copies above thresholds::kSyncCopyBytes
};

struct MemsetStats {
  std::int64_t count = 0;
  std::int64_t bytes = 0;
  std::int64_t total_ns = 0;
};

struct SyncStats {
  SyncKind kind = SyncKind::Unknown;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
};

struct RuntimeStats {
  std::string name;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
};

// One Tensor-Core-eligible ATen op, keyed by name, input shapes and input types.
struct EligibleOpStats {
  std::string name;
  std::string shapes;                // "[64,3,224,224] [64,3,7,7]"
  std::string dtypes;                // "float float"
  std::string misaligned;            // dims_not_multiple_of_8(), "" when all are (or unknown)
  std::int64_t instances = 0;        // seen on the host
  std::int64_t with_kernels = 0;     // instances tied to at least one kernel
  std::int64_t only_cuda_cores = 0;  // ... whose kernels all ran on CUDA cores (by name)
  std::int64_t tensor_core_ns = 0;   // by name, or by this op (16- / 8-bit inputs on sm_80+)
  std::int64_t cuda_core_ns = 0;
  std::int64_t unknown_ns = 0;  // kernels neither the name nor the op decided
};

struct PhaseGpuStats {
  std::int64_t kernel_count = 0;
  std::int64_t kernel_ns = 0;
  std::int64_t tensor_core_ns = 0;  // by name or by op
  std::int64_t unknown_ns = 0;      // compute kernels neither decided
  std::int64_t communication_ns = 0;
  std::int64_t memcpy_count = 0;
  std::int64_t memcpy_bytes = 0;
  std::int64_t memcpy_ns = 0;
};

// One training step (a step annotation: a fathom step range, ProfilerStep#N): the GPU work its
// thread launched while it was open, and how much of its wall-clock window the devices were busy.
struct StepGpuStats {
  std::string name;  // the annotation's name ("step 12", "ProfilerStep#3")
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  PhaseGpuStats work;        // launched by the step (by the launch's host time)
  std::int64_t busy_ns = 0;  // union of GPU intervals inside the window, summed over devices
};

// One device's timeline over the analysed window. Each *_ns is the length of a union of
// intervals, so concurrent work on several streams counts once.
struct DeviceTimelineStats {
  std::int32_t device = 0;
  std::int64_t busy_ns = 0;     // kernels, copies and memsets
  std::int64_t kernel_ns = 0;   // kernels
  std::int64_t compute_ns = 0;  // kernels that are not communication
  std::int64_t communication_ns = 0;
  std::int64_t memcpy_ns = 0;
  std::int64_t kernel_or_memcpy_ns = 0;
  std::int64_t idle_ns = 0;  // window minus busy
  IdleStats idle;
};

// Everything the analyses read: a snapshot of the aggregator.
struct GpuAggregate {
  std::vector<DeviceProperties> devices;
  std::vector<KernelStats> kernels;  // one per distinct name
  std::vector<MemcpyStats> memcpys;  // one per (kind, src, dst, async)
  MemsetStats memsets;
  std::vector<SyncStats> syncs;  // one per kind
  std::vector<RuntimeStats> runtime_calls;
  std::vector<EligibleOpStats> eligible_ops;
  bool op_dtypes_recorded = false;  // some eligible op carried its input types (record_shapes)
  std::array<PhaseGpuStats, kPhaseBuckets> phases{};
  std::vector<DeviceTimelineStats> timelines;  // one per device with activity
  std::vector<StepGpuStats> step_rows;  // in start order, when AggregatorLimits::step_rows > 0
  std::int64_t folded_steps = 0;        // steps past that limit: in the totals, not in rows

  std::int64_t steps = 0;  // step annotations (ProfilerStep#N, fathom steps)
  std::int64_t step_ns = 0;
  // The wall-clock window the timeline covers: the steps (and the GPU work they launched) when
  // there are any, else everything recorded.
  std::int64_t window_begin_ns = 0;
  std::int64_t window_end_ns = 0;
  bool window_from_steps = false;

  std::int64_t records = 0;
  std::int64_t dropped_records = 0;  // lost by the source, or by fathom's own limits
  std::int64_t late_records = 0;     // arrived after their time had been swept: not in the timeline
  // Launches still owed their GPU records that the memory bound forgot (the aggregator keeps a
  // launch, and the ops and phases around it, until its GPU work arrives): that work, if it
  // comes, is attributed by its own time only.
  std::int64_t forgotten_launches = 0;
  std::int64_t folded_kernel_names = 0;  // distinct names past the limit, kept in one row
  std::int64_t folded_op_keys = 0;

  std::int64_t window_ns() const noexcept { return window_end_ns - window_begin_ns; }
  bool has_gpu_activity() const noexcept {
    return !kernels.empty() || !memcpys.empty() || memsets.count > 0;
  }
};

struct AggregatorLimits {
  std::size_t window_records = std::size_t{1} << 16;  // GPU records held before a sweep
  std::size_t host_records = std::size_t{1} << 20;  // launches / ops / ranges held for correlation
  std::size_t kernel_names = std::size_t{1} << 14;  // distinct names; beyond, one folded row
  std::size_t op_keys = std::size_t{1} << 12;       // distinct eligible op keys; beyond, one row
  // Steps kept as rows of their own (StepGpuStats). Off by default: a live session's epoch has its
  // own step table; `fathom analyze` turns it on. Steps must not overlap (one process).
  std::size_t step_rows = 0;
};

class GpuAggregator {
 public:
  explicit GpuAggregator(AggregatorLimits limits = {});
  ~GpuAggregator();
  GpuAggregator(GpuAggregator&&) noexcept;
  GpuAggregator& operator=(GpuAggregator&&) noexcept;

  void add(const DeviceProperties& r) noexcept;
  void add(const KernelRecord& r) noexcept;
  void add(const MemcpyRecord& r) noexcept;
  void add(const MemsetRecord& r) noexcept;
  void add(const SyncRecord& r) noexcept;
  void add(const RuntimeCallRecord& r) noexcept;
  void add(const OpRecord& r) noexcept;
  void add(const AnnotationRecord& r) noexcept;
  // A batch: host records first, so the GPU work finds the launches and ops it came from.
  void add(const GpuActivity& batch) noexcept;
  void add_dropped(std::int64_t n) noexcept;

  // Sweeps the held window into the timeline and the op / phase attribution.
  void flush() noexcept;
  // Sweeps, then returns what has been aggregated so far.
  GpuAggregate snapshot();

  std::size_t held_records() const noexcept;  // GPU and host records held for the next sweep
  // Entries compared or hashed to find records' devices so far: linear in the records whatever
  // the number of devices (tests bound it; a scan per record made 50,000 devices quadratic).
  std::int64_t device_lookup_steps() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What a CUDA runtime or driver call is to the timeline: a launch of GPU work, or a call that
// blocks the host until the GPU catches up (cuda*Synchronize, synchronous cudaMemcpy).
bool is_launch_call(std::string_view name) noexcept;
bool is_host_sync_call(std::string_view name) noexcept;
// A call that launches GPU work (a kernel, a graph, a copy, a memset): it is owed a GPU record.
bool launches_gpu_work(std::string_view name) noexcept;

// All of a source's records, aggregated in one sweep (a trace or replay file); step_rows as in
// AggregatorLimits (`fathom analyze` keeps a row per step).
GpuAggregate aggregate(const GpuActivity& activity, std::size_t step_rows = 0);

}  // namespace fathom
