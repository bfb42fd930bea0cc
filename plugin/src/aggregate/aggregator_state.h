#pragma once
// The GPU aggregator's state, shared by the files that implement it (one concept each):
//   gpu_aggregator.cpp      the public API: records in, counted; flush; aggregate()
//   aggregator_tables.cpp   the statistics tables every record lands in, and the host records
//                           (launches, ops, phase and step ranges) held for attribution
//   aggregator_sweep.cpp    the sweep: GPU records attributed to phases and ops, the timeline
//   aggregator_snapshot.cpp the snapshot the analyses read (GpuAggregate)
// Internal to aggregate/: the helper types live in fathom::aggregation, made visible to Impl's
// files only by this header.
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "aggregate/device_index.h"
#include "aggregate/gpu_aggregator.h"
#include "aggregate/held_window.h"
#include "aggregate/id_map.h"
#include "aggregate/kernel_classifier.h"
#include "aggregate/name_key_cache.h"

namespace fathom {
namespace aggregation {
// Not noexcept on purpose: libstdc++ then keeps each node's hash beside it (it does so for hashes
// that may throw), and a lookup compares those instead of hashing every name it passes in the
// bucket again. With 210-byte names past the row limit, that rehashing was a tenth of
// `fathom analyze`'s time on a trace of 2M distinct names.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using NameIndex = std::unordered_map<std::string, std::uint32_t, StringHash, std::equal_to<>>;

// The host side of a launch (a runtime call that launches GPU work), by correlation id. Kept
// until its GPU record has been attributed (paid), across generations: in a loop without a sync
// per step, CUPTI returns a stream's kernels only once its buffer is full, many step ends later.
struct Launch {
  std::int64_t start = 0;
  std::uint64_t thread = 0;
  std::uint64_t external_id = 0;
  std::int8_t phase = -1;
  bool paid = false;
};

// One eligible op on the host, until the kernels it launched have been seen.
struct OpInstance {
  std::uint32_t key = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::uint64_t thread = 0;
  std::uint64_t external_id = 0;  // OpRecord::external_id, 0 if none
  std::int64_t tensor_core_ns = 0;
  std::int64_t cuda_core_ns = 0;
  std::int64_t unknown_ns = 0;
  std::int32_t kernels = 0;
  std::int32_t tensor_core_kernels = 0;
  std::int32_t unknown_kernels = 0;
  bool tensor_core_inputs = false;  // tensor_core_input_types() of its recorded input types
};

struct PhaseRange {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::uint64_t thread = 0;
  std::uint32_t generation = 0;
  Phase phase = Phase::Data;
};

// A step row's window, for finding the step a launch or a GPU interval falls in.
struct StepWindow {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::uint64_t thread = 0;
  std::uint32_t row = 0;
};

struct HostSpan {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::uint32_t generation = 0;
};

// The union of intervals fed in start order: its length so far and its open segment.
struct Union {
  std::int64_t seg_start = 0;
  std::int64_t seg_end = 0;
  std::int64_t closed = 0;
  bool open = false;

  void add(std::int64_t s, std::int64_t e) noexcept {
    if (!open) {
      open = true;
      seg_start = s;
      seg_end = e;
    } else if (s > seg_end) {
      closed += seg_end - seg_start;
      seg_start = s;
      seg_end = e;
    } else {
      seg_end = std::max(seg_end, e);
    }
  }
  std::int64_t total() const noexcept { return closed + (open ? seg_end - seg_start : 0); }
};

// A step row's busy time per device: the union of the GPU intervals clipped to its window.
struct StepBusy {
  std::vector<std::pair<std::int32_t, Union>> devices;
  DeviceIndex index;  // of devices
};

struct DeviceState {
  std::int32_t device = 0;
  Union busy, kernel, compute, communication, memcpy, kernel_or_memcpy;
  std::int64_t swept_start = kNever;  // latest start swept by earlier sweeps
  IdleStats idle;
};

inline std::int64_t duration(std::int64_t start, std::int64_t end) noexcept {
  return std::max<std::int64_t>(0, end - start);
}

inline std::int8_t phase_index(const std::optional<Phase>& p) noexcept {
  return p ? static_cast<std::int8_t>(*p) : std::int8_t{-1};
}

}  // namespace aggregation

using namespace aggregation;  // NOLINT: Impl's files only (see above)

struct GpuAggregator::Impl {
  AggregatorLimits limits;

  std::vector<DeviceProperties> devices;
  DeviceIndex device_index;  // of devices: a hostile trace may name thousands
  NameIndex kernel_index;    // by the name the rows show (normalize_kernel_name())
  NameIndex source_names;    // the sources' texts the normalizer changed (mangled), to their rows
  NameKeyCache kernel_keys;  // by KernelRecord::name_key, checked against the source's text
  std::vector<KernelStats> kernels;
  std::vector<MemcpyStats> memcpys;
  MemsetStats memsets;
  std::vector<SyncStats> syncs;
  NameIndex runtime_index;
  std::vector<RuntimeStats> runtime_calls;
  std::vector<bool> runtime_blocks;    // per runtime_calls row: is_host_sync_call(name)
  std::vector<bool> runtime_launches;  // per runtime_calls row: launches_gpu_work(name)
  std::uint32_t last_runtime = 0;      // the row of the last call: launches come in runs
  NameIndex op_index;
  std::vector<EligibleOpStats> ops;
  std::string op_key;  // add_op's key, built here to keep its memory from one op to the next
  std::array<PhaseGpuStats, kPhaseBuckets> phases{};
  std::vector<DeviceState> timelines;
  DeviceIndex timeline_index;  // of timelines
  std::vector<StepGpuStats> step_rows;
  std::vector<StepWindow> step_windows;  // sorted by start
  std::vector<StepBusy> step_busy;       // per row
  std::int64_t folded_steps = 0;

  std::int64_t records = 0, dropped = 0, late = 0, folded_names = 0, folded_ops = 0;
  bool op_dtypes = false;
  std::int64_t steps = 0, step_ns = 0;
  std::int64_t first_step = std::numeric_limits<std::int64_t>::max(), last_step_end = kNever;
  std::int64_t min_time = std::numeric_limits<std::int64_t>::max(), max_time = kNever;
  std::int64_t max_gpu_end = kNever;

  // The window held for the next sweep, and the host records of this and the last generation
  // (a kernel is delivered in the same or the next batch as its launch).
  HeldWindow held;
  std::uint32_t generation = 0;
  std::array<IdMap<Launch>, 2> launches;
  std::array<std::vector<OpInstance>, 2> op_instances;
  std::array<IdMap<std::uint32_t>, 2> op_by_external_id;
  std::vector<PhaseRange> ranges;
  std::vector<HostSpan> host_syncs;
  std::size_t host_added = 0;  // host records held in this generation
  // Retention by what is still owed: launches not yet paid are carried into the next generation,
  // and the ops, phase ranges and syncs a launch still to come (or owed) may fall in are kept
  // with them: those ending at or after the horizon, the earlier of the oldest owed launch and
  // the latest launch seen (launch records come in time order). At most carry_limit() launches
  // are carried; the oldest past it are forgotten, counted in forgotten_launches.
  std::int64_t latest_launch = kNever;
  std::int64_t forgotten_launches = 0;
  std::size_t carried_last = 0;         // launches the last generation change carried
  std::array<std::size_t, 2> unpaid{};  // per generation slot: its launches not yet paid
  // An eighth of the host limit each for carried launches and for the records kept around them,
  // counted in the new generation's share (half the limit): held records stay under the limit.
  std::size_t carry_limit() const noexcept {
    return std::max<std::size_t>(limits.host_records / 8, 1);
  }

  explicit Impl(AggregatorLimits l) : limits(l) {}

  // Counts the record, and drops it (counted) when keeping it fails: add() never throws.
  template <typename F>
  void guarded(F&& keep) noexcept {
    ++records;
    try {
      keep();
    } catch (...) {
      ++dropped;
    }
  }

  std::size_t cur() const noexcept { return generation % 2; }
  std::size_t prev() const noexcept { return (generation + 1) % 2; }

  std::size_t host_held() const noexcept {
    return launches[0].size() + launches[1].size() + op_instances[0].size() +
           op_instances[1].size() + ranges.size() + host_syncs.size();
  }

  void note_time(std::int64_t start, std::int64_t end) noexcept {
    min_time = std::min(min_time, start);
    max_time = std::max(max_time, end);
  }

  // The device's compute capability, where a DeviceProperties record named it.
  ComputeCapability capability(std::int32_t device) const noexcept {
    const std::size_t at =
        device_index.find(devices, device, [](const DeviceProperties& d) { return d.id; });
    if (at == DeviceIndex::npos) return {};
    return {devices[at].compute_major, devices[at].compute_minor};
  }

  // One class per name, with the capability of the device it was first seen on (a process with
  // GPUs of two architectures would need one row per device; none of the sources mixes them).
  std::uint32_t intern_kernel(std::string_view name, std::int32_t device);
  // The record's row: by its name key where the source gave one, else by intern_kernel.
  std::uint32_t kernel_row(const KernelRecord& r);

  void add_kernel(const KernelRecord& r);

  void add_memcpy(const MemcpyRecord& r);

  void add_memset(const MemsetRecord& r);

  void hold(const HeldGpu& h);

  void add_sync(const SyncRecord& r);

  void add_runtime(const RuntimeCallRecord& r);

  void add_op(const OpRecord& r);

  void add_annotation(const AnnotationRecord& r);

  // Two generations are held: a generation may take half the limit.
  void check_host_limit();

  // --- the sweep ---

  struct Lookup {
    std::vector<PhaseRange> ranges;  // sorted by start
    std::int64_t longest_range = 0;
    std::vector<std::pair<std::int64_t, std::int64_t>> data;  // merged data-phase ranges
    std::vector<HostSpan> syncs;                              // sorted by start
    std::vector<std::int64_t> sync_end_max;                   // running max of end
    struct OpSpan {
      std::uint64_t thread;
      std::int64_t start, end;
      OpInstance* op;
    };
    std::vector<OpSpan> ops;  // sorted by (thread, start)
    std::int64_t longest_op = 0;
  };

  Lookup build_lookup();

  void add_step_row(const AnnotationRecord& r);
  // The step row whose window holds t, preferring one on thread; -1 when none does.
  std::int64_t step_at(std::int64_t t, std::uint64_t thread) const;
  // Adds the GPU interval [s, e) on device to the busy time of the steps it overlaps.
  void add_step_busy(std::int32_t device, std::int64_t s, std::int64_t e);

  // The innermost phase range open at t, preferring ranges on the launching thread.
  static std::optional<Phase> phase_at(const Lookup& l, std::int64_t t, std::uint64_t thread);

  // The innermost eligible op on thread that was running at t.
  static OpInstance* op_at(const Lookup& l, std::uint64_t thread, std::int64_t t);

  // The launch and the generation slot that holds it.
  std::pair<Launch*, std::size_t> find_launch(std::uint64_t correlation);

  OpInstance* find_op(std::uint64_t external_id);

  // Phase and op of one GPU record, from what the source said or what the host was doing.
  void attribute(HeldGpu& h, const Lookup& l);

  std::int64_t window_begin() const noexcept { return steps ? first_step : min_time; }
  std::int64_t window_end() const noexcept {
    return steps ? std::max(last_step_end, max_gpu_end) : max_time;
  }

  static std::int64_t data_overlap(const Lookup& l, std::int64_t a, std::int64_t b);

  // Was the host blocked in a synchronization when the GPU went idle at t?
  static bool host_synchronizing(const Lookup& l, std::int64_t t);

  // Idle [a, b): data wait first (the overlap with data phases), the rest to the host's state
  // when the GPU ran out of work. launch_ns: when the work that ended the gap was launched.
  static void attribute_gap(IdleStats& idle, const Lookup& l, std::int64_t a, std::int64_t b,
                            std::int64_t launch_ns);

  DeviceState& device_state(std::int32_t device);

  void sweep_timeline(const Lookup& l);

  void fold(const OpInstance& op);

  // Forgets the host records of the generation before last, except what is still owed.
  void next_generation();
  // The launches of generation g not yet paid, oldest forgotten past carry_limit().
  std::vector<std::pair<std::uint64_t, Launch>> owed_launches(std::size_t g);

  void sweep();

  GpuAggregate snapshot();
};

}  // namespace fathom
