#include <fathom/annotation_roles.h>
#include <fathom/gpu_aggregator.h>
#include <fathom/tensor_core_ops.h>
#include <fathom/thresholds.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <string_view>
#include <unordered_map>

namespace fathom {
namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::min();

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};
using NameIndex = std::unordered_map<std::string, std::uint32_t, StringHash, std::equal_to<>>;

enum class HeldType : std::uint8_t { Kernel, Memcpy, Memset };

// A GPU record as the sweep needs it: ~64 bytes, whatever the kernel's name.
struct HeldGpu {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t bytes = 0;
  std::uint64_t correlation = 0;
  std::uint64_t external_id = 0;
  std::int64_t launch_ns = kNever;  // host time of the launch, found by the sweep
  std::int32_t device = 0;
  HeldType type = HeldType::Kernel;
  bool tensor_core = false;
  bool communication = false;
  std::int8_t phase = -1;      // given by the source (external correlation); -1 if not
  bool undecided = false;      // the name says neither Tensor Cores nor CUDA cores
  bool op_may_decide = false;  // ... and a 16- / 8-bit eligible op on this device would
  std::uint32_t kernel = 0;    // KernelStats index
};

// The host side of a launch (a runtime call), by correlation id.
struct Launch {
  std::int64_t start = 0;
  std::uint64_t thread = 0;
  std::uint64_t external_id = 0;
  std::int8_t phase = -1;
};

// One eligible op on the host, until the kernels it launched have been seen.
struct OpInstance {
  std::uint32_t key = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::uint64_t thread = 0;
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

struct DeviceState {
  std::int32_t device = 0;
  Union busy, kernel, compute, communication, memcpy, kernel_or_memcpy;
  std::int64_t swept_start = kNever;  // latest start swept by earlier sweeps
  IdleStats idle;
};

std::int64_t duration(std::int64_t start, std::int64_t end) noexcept {
  return std::max<std::int64_t>(0, end - start);
}

std::int8_t phase_index(const std::optional<Phase>& p) noexcept {
  return p ? static_cast<std::int8_t>(*p) : std::int8_t{-1};
}

}  // namespace

struct GpuAggregator::Impl {
  AggregatorLimits limits;

  std::vector<DeviceProperties> devices;
  NameIndex kernel_index;
  std::vector<KernelStats> kernels;
  std::vector<MemcpyStats> memcpys;
  MemsetStats memsets;
  std::vector<SyncStats> syncs;
  NameIndex runtime_index;
  std::vector<RuntimeStats> runtime_calls;
  NameIndex op_index;
  std::vector<EligibleOpStats> ops;
  std::array<PhaseGpuStats, kPhaseBuckets> phases{};
  std::vector<DeviceState> timelines;

  std::int64_t records = 0, dropped = 0, late = 0, folded_names = 0, folded_ops = 0;
  bool op_dtypes = false;
  std::int64_t steps = 0, step_ns = 0;
  std::int64_t first_step = std::numeric_limits<std::int64_t>::max(), last_step_end = kNever;
  std::int64_t min_time = std::numeric_limits<std::int64_t>::max(), max_time = kNever;
  std::int64_t max_gpu_end = kNever;

  // The window held for the next sweep, and the host records of this and the last generation
  // (a kernel is delivered in the same or the next batch as its launch).
  std::vector<HeldGpu> held;
  std::uint32_t generation = 0;
  std::array<std::unordered_map<std::uint64_t, Launch>, 2> launches;
  std::array<std::vector<OpInstance>, 2> op_instances;
  std::array<std::unordered_map<std::uint64_t, std::uint32_t>, 2> op_by_external_id;
  std::vector<PhaseRange> ranges;
  std::vector<HostSpan> host_syncs;
  std::size_t host_added = 0;  // host records held in this generation

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
    for (const DeviceProperties& d : devices)
      if (d.id == device) return {d.compute_major, d.compute_minor};
    return {};
  }

  // One class per name, with the capability of the device it was first seen on (a process with
  // GPUs of two architectures would need one row per device; none of the sources mixes them).
  std::uint32_t intern_kernel(std::string_view name, std::int32_t device) {
    if (auto it = kernel_index.find(name); it != kernel_index.end()) return it->second;
    KernelClass kind = classify_kernel(name, capability(device));
    std::string key(name);
    if (kernel_index.size() >= limits.kernel_names) {
      // Past the limit, names share a row per kind so the Tensor Core and NCCL totals stay exact.
      ++folded_names;
      key = kind.communication                   ? "(more kernel names: communication)"
            : kind.decision == Decision::Unknown ? "(more kernel names: unknown)"
            : kind.tensor_core                   ? "(more kernel names: tensor core)"
                                                 : "(more kernel names)";
      kind.family = "folded";
      kind.precision = Precision::Unknown;
      kind.needs_capability = false;  // the row mixes names: it cannot say why each is unknown
      if (auto it = kernel_index.find(key); it != kernel_index.end()) return it->second;
    }
    const auto id = static_cast<std::uint32_t>(kernels.size());
    KernelStats s;
    s.name = key;
    s.kind = kind;
    kernels.push_back(std::move(s));
    kernel_index.emplace(std::move(key), id);
    return id;
  }

  void add_kernel(const KernelRecord& r) {
    const std::uint32_t id = intern_kernel(r.name, r.device);
    KernelStats& k = kernels[id];
    const std::int64_t d = duration(r.start_ns, r.end_ns);
    k.min_ns = k.count ? std::min(k.min_ns, d) : d;
    k.max_ns = std::max(k.max_ns, d);
    ++k.count;
    k.total_ns += d;
    if (d < thresholds::kTinyKernelNs) {
      ++k.tiny_count;
      k.tiny_ns += d;
    }
    HeldGpu h;
    h.start = r.start_ns;
    h.end = r.start_ns + d;
    h.correlation = r.correlation_id;
    h.external_id = r.external_id;
    h.device = r.device;
    h.type = HeldType::Kernel;
    h.tensor_core = k.kind.tensor_core;
    h.communication = k.kind.communication;
    h.phase = phase_index(r.phase);
    h.undecided = k.kind.decision == Decision::Unknown;
    h.op_may_decide = tensor_core_by_op(k.kind, capability(r.device), true);
    h.kernel = id;
    hold(h);
  }

  void add_memcpy(const MemcpyRecord& r) {
    auto it = std::find_if(memcpys.begin(), memcpys.end(), [&](const MemcpyStats& m) {
      return m.kind == r.kind && m.src == r.src && m.dst == r.dst && m.async == r.async;
    });
    if (it == memcpys.end()) {
      memcpys.push_back(MemcpyStats{r.kind, r.src, r.dst, r.async});
      it = memcpys.end() - 1;
    }
    const std::int64_t d = duration(r.start_ns, r.end_ns);
    ++it->count;
    it->bytes += r.bytes;
    it->total_ns += d;
    if (r.bytes > thresholds::kSyncCopyBytes) ++it->large_count;
    HeldGpu h;
    h.start = r.start_ns;
    h.end = r.start_ns + d;
    h.bytes = r.bytes;
    h.correlation = r.correlation_id;
    h.external_id = r.external_id;
    h.device = r.device;
    h.type = HeldType::Memcpy;
    h.phase = phase_index(r.phase);
    hold(h);
  }

  void add_memset(const MemsetRecord& r) {
    const std::int64_t d = duration(r.start_ns, r.end_ns);
    ++memsets.count;
    memsets.bytes += r.bytes;
    memsets.total_ns += d;
    HeldGpu h;
    h.start = r.start_ns;
    h.end = r.start_ns + d;
    h.bytes = r.bytes;
    h.correlation = r.correlation_id;
    h.external_id = r.external_id;
    h.device = r.device;
    h.type = HeldType::Memset;
    h.phase = phase_index(r.phase);
    hold(h);
  }

  void hold(const HeldGpu& h) {
    note_time(h.start, h.end);
    max_gpu_end = std::max(max_gpu_end, h.end);
    held.push_back(h);
    if (held.size() >= limits.window_records) sweep();
  }

  void add_sync(const SyncRecord& r) {
    auto it = std::find_if(syncs.begin(), syncs.end(),
                           [&](const SyncStats& s) { return s.kind == r.kind; });
    if (it == syncs.end()) {
      syncs.push_back(SyncStats{r.kind});
      it = syncs.end() - 1;
    }
    ++it->count;
    it->total_ns += duration(r.start_ns, r.end_ns);
    note_time(r.start_ns, r.end_ns);
    // A stream waiting on an event blocks the stream, not the host.
    if (r.kind != SyncKind::StreamWaitEvent)
      host_syncs.push_back({r.start_ns, r.end_ns, generation});
    check_host_limit();
  }

  void add_runtime(const RuntimeCallRecord& r) {
    auto it = runtime_index.find(r.name);
    std::uint32_t id;
    if (it != runtime_index.end()) {
      id = it->second;
    } else {
      id = static_cast<std::uint32_t>(runtime_calls.size());
      runtime_calls.push_back(RuntimeStats{r.name});
      runtime_index.emplace(r.name, id);
    }
    ++runtime_calls[id].count;
    runtime_calls[id].total_ns += duration(r.start_ns, r.end_ns);
    note_time(r.start_ns, r.end_ns);
    if (r.correlation_id != 0)
      launches[cur()][r.correlation_id] =
          Launch{r.start_ns, r.thread, r.external_id, phase_index(r.phase)};
    if (is_host_sync_call(r.name)) host_syncs.push_back({r.start_ns, r.end_ns, generation});
    check_host_limit();
  }

  void add_op(const OpRecord& r) {
    note_time(r.start_ns, r.end_ns);
    if (!tensor_core_eligible_op(r.name)) return;
    std::string key = r.name;
    const std::string shapes = op_shapes_text(r.input_shapes);
    const std::string dtypes = op_dtypes_text(r.input_shapes, r.input_dtypes);
    op_dtypes = op_dtypes || !dtypes.empty();
    key += '\x1f';
    key += shapes;
    key += '\x1f';
    key += dtypes;
    std::uint32_t id;
    if (auto it = op_index.find(key); it != op_index.end()) {
      id = it->second;
    } else if (op_index.size() >= limits.op_keys) {
      ++folded_ops;
      auto f = op_index.find(std::string_view("(more op shapes)"));
      if (f == op_index.end()) {
        id = static_cast<std::uint32_t>(ops.size());
        EligibleOpStats folded;
        folded.name = "(more op shapes)";
        ops.push_back(std::move(folded));
        op_index.emplace("(more op shapes)", id);
      } else {
        id = f->second;
      }
    } else {
      id = static_cast<std::uint32_t>(ops.size());
      ops.push_back(
          EligibleOpStats{r.name, shapes, dtypes, dims_not_multiple_of_8(r.name, r.input_shapes)});
      op_index.emplace(std::move(key), id);
    }
    ++ops[id].instances;
    auto& instances = op_instances[cur()];
    if (r.external_id != 0)
      op_by_external_id[cur()][r.external_id] = static_cast<std::uint32_t>(instances.size());
    OpInstance instance{id, r.start_ns, r.end_ns, r.thread};
    instance.tensor_core_inputs = tensor_core_input_types(r.input_dtypes);
    instances.push_back(instance);
    check_host_limit();
  }

  void add_annotation(const AnnotationRecord& r) {
    note_time(r.start_ns, r.end_ns);
    const AnnotationMeaning m = annotation_meaning(r.name);
    if (m.role == AnnotationRole::Step) {
      ++steps;
      step_ns += duration(r.start_ns, r.end_ns);
      first_step = std::min(first_step, r.start_ns);
      last_step_end = std::max(last_step_end, r.end_ns);
    } else if (m.role == AnnotationRole::Phase) {
      ranges.push_back(PhaseRange{r.start_ns, r.end_ns, r.thread, generation, m.phase});
      check_host_limit();
    }
  }

  // Two generations are held: a generation may take half the limit.
  void check_host_limit() {
    if (++host_added >= limits.host_records / 2) sweep();
  }

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

  Lookup build_lookup() {
    Lookup l;
    l.ranges = ranges;
    std::sort(l.ranges.begin(), l.ranges.end(),
              [](const PhaseRange& a, const PhaseRange& b) { return a.start < b.start; });
    for (const PhaseRange& r : l.ranges) {
      l.longest_range = std::max(l.longest_range, duration(r.start, r.end));
      if (r.phase != Phase::Data) continue;
      if (!l.data.empty() && r.start <= l.data.back().second)
        l.data.back().second = std::max(l.data.back().second, r.end);
      else
        l.data.emplace_back(r.start, r.end);
    }
    l.syncs = host_syncs;
    std::sort(l.syncs.begin(), l.syncs.end(),
              [](const HostSpan& a, const HostSpan& b) { return a.start < b.start; });
    std::int64_t m = kNever;
    for (const HostSpan& s : l.syncs) l.sync_end_max.push_back(m = std::max(m, s.end));
    for (auto& gen : op_instances)
      for (OpInstance& op : gen) {
        l.ops.push_back({op.thread, op.start, op.end, &op});
        l.longest_op = std::max(l.longest_op, duration(op.start, op.end));
      }
    std::sort(l.ops.begin(), l.ops.end(), [](const Lookup::OpSpan& a, const Lookup::OpSpan& b) {
      return a.thread != b.thread ? a.thread < b.thread : a.start < b.start;
    });
    return l;
  }

  // The innermost phase range open at t, preferring ranges on the launching thread.
  static std::optional<Phase> phase_at(const Lookup& l, std::int64_t t, std::uint64_t thread) {
    auto it = std::upper_bound(l.ranges.begin(), l.ranges.end(), t,
                               [](std::int64_t v, const PhaseRange& r) { return v < r.start; });
    std::optional<Phase> any;
    while (it != l.ranges.begin()) {
      --it;
      if (it->start < t - l.longest_range) break;
      if (it->end <= t) continue;
      if (it->thread == thread) return it->phase;
      if (!any) any = it->phase;
    }
    return any;
  }

  // The innermost eligible op on thread that was running at t.
  static OpInstance* op_at(const Lookup& l, std::uint64_t thread, std::int64_t t) {
    auto it = std::upper_bound(
        l.ops.begin(), l.ops.end(), std::make_pair(thread, t),
        [](const std::pair<std::uint64_t, std::int64_t>& v, const Lookup::OpSpan& o) {
          return v.first != o.thread ? v.first < o.thread : v.second < o.start;
        });
    // Ops on one thread nest or follow each other: none that starts before t - longest can hold t.
    while (it != l.ops.begin()) {
      --it;
      if (it->thread != thread || it->start < t - l.longest_op) break;
      if (it->end > t) return it->op;
    }
    return nullptr;
  }

  const Launch* find_launch(std::uint64_t correlation) const {
    if (correlation == 0) return nullptr;
    for (std::size_t g : {cur(), prev()}) {
      auto it = launches[g].find(correlation);
      if (it != launches[g].end()) return &it->second;
    }
    return nullptr;
  }

  OpInstance* find_op(std::uint64_t external_id) {
    if (external_id == 0) return nullptr;
    for (std::size_t g : {cur(), prev()}) {
      auto it = op_by_external_id[g].find(external_id);
      if (it != op_by_external_id[g].end()) return &op_instances[g][it->second];
    }
    return nullptr;
  }

  // Phase and op of one GPU record, from what the source said or what the host was doing.
  void attribute(HeldGpu& h, const Lookup& l) {
    const Launch* launch = find_launch(h.correlation);
    const std::uint64_t external_id = h.external_id ? h.external_id
                                      : launch      ? launch->external_id
                                                    : 0;
    OpInstance* op = find_op(external_id);
    if (!op && launch && !l.ops.empty()) op = op_at(l, launch->thread, launch->start);
    h.launch_ns = launch ? launch->start : kNever;

    std::optional<Phase> phase;
    if (h.phase >= 0)
      phase = static_cast<Phase>(h.phase);
    else if (launch && launch->phase >= 0)
      phase = static_cast<Phase>(launch->phase);
    else if (launch)
      phase = phase_at(l, launch->start, launch->thread);
    else if (op)
      phase = phase_at(l, op->start, op->thread);
    else
      phase = phase_at(l, h.start, 0);
    PhaseGpuStats& p = phases[phase ? static_cast<std::size_t>(*phase) : kUnattributed];

    const std::int64_t d = h.end - h.start;
    if (h.type == HeldType::Kernel) {
      bool tensor_core = h.tensor_core, unknown = h.undecided && !h.communication;
      if (unknown && op && op->tensor_core_inputs && h.op_may_decide) {
        tensor_core = true;
        unknown = false;
        ++kernels[h.kernel].tensor_core_by_op_count;
        kernels[h.kernel].tensor_core_by_op_ns += d;
      }
      ++p.kernel_count;
      p.kernel_ns += d;
      if (tensor_core) p.tensor_core_ns += d;
      if (unknown) p.unknown_ns += d;
      if (h.communication) p.communication_ns += d;
      if (op) {
        ++op->kernels;
        if (tensor_core) {
          ++op->tensor_core_kernels;
          op->tensor_core_ns += d;
        } else if (unknown) {
          ++op->unknown_kernels;
          op->unknown_ns += d;
        } else {
          op->cuda_core_ns += d;
        }
      }
    } else if (h.type == HeldType::Memcpy) {
      ++p.memcpy_count;
      p.memcpy_bytes += h.bytes;
      p.memcpy_ns += d;
    }
  }

  std::int64_t window_begin() const noexcept { return steps ? first_step : min_time; }
  std::int64_t window_end() const noexcept {
    return steps ? std::max(last_step_end, max_gpu_end) : max_time;
  }

  static std::int64_t data_overlap(const Lookup& l, std::int64_t a, std::int64_t b) {
    std::int64_t sum = 0;
    auto it = std::upper_bound(l.data.begin(), l.data.end(), a,
                               [](std::int64_t v, const auto& r) { return v < r.first; });
    if (it != l.data.begin()) --it;
    for (; it != l.data.end() && it->first < b; ++it)
      sum += std::max<std::int64_t>(0, std::min(b, it->second) - std::max(a, it->first));
    return std::min(sum, b - a);
  }

  // Was the host blocked in a synchronization when the GPU went idle at t?
  static bool host_synchronizing(const Lookup& l, std::int64_t t) {
    auto it = std::upper_bound(l.syncs.begin(), l.syncs.end(), t,
                               [](std::int64_t v, const HostSpan& s) { return v < s.start; });
    if (it == l.syncs.begin()) return false;
    return l.sync_end_max[static_cast<std::size_t>(it - l.syncs.begin()) - 1] >= t;
  }

  // Idle [a, b): data wait first (the overlap with data phases), the rest to the host's state
  // when the GPU ran out of work. launch_ns: when the work that ended the gap was launched.
  static void attribute_gap(IdleStats& idle, const Lookup& l, std::int64_t a, std::int64_t b,
                            std::int64_t launch_ns) {
    if (b <= a) return;
    ++idle.gaps;
    const std::int64_t data = data_overlap(l, a, b);
    idle.data_wait_ns += data;
    const std::int64_t rest = (b - a) - data;
    if (rest <= 0) return;
    if (host_synchronizing(l, a))
      idle.sync_ns += rest;
    else if (launch_ns != kNever && launch_ns >= a)
      idle.host_launch_ns += rest;
    // else: left to other_ns, which the snapshot computes as what is left of the idle time
  }

  DeviceState& device_state(std::int32_t device) {
    for (DeviceState& t : timelines)
      if (t.device == device) return t;
    DeviceState d;
    d.device = device;
    timelines.push_back(d);
    return timelines.back();
  }

  void sweep_timeline(const Lookup& l) {
    const auto by_device_then_start = [](const HeldGpu& a, const HeldGpu& b) {
      return a.device != b.device ? a.device < b.device : a.start < b.start;
    };
    // CUPTI delivers records nearly in order; most sweeps need no sort at all.
    if (!std::is_sorted(held.begin(), held.end(), by_device_then_start))
      std::sort(held.begin(), held.end(), by_device_then_start);
    const std::int64_t begin = window_begin();
    DeviceState* st = nullptr;
    std::int64_t swept_before = kNever, latest = kNever;
    for (const HeldGpu& h : held) {
      if (!st || st->device != h.device) {
        if (st) st->swept_start = std::max(st->swept_start, latest);
        st = &device_state(h.device);
        swept_before = st->swept_start;
        latest = kNever;
      }
      if (h.start < swept_before) {  // its neighbours in time have been swept already
        ++late;
        continue;
      }
      latest = std::max(latest, h.start);
      const std::int64_t s = std::max(h.start, begin);
      const std::int64_t e = h.end;
      if (e <= s) continue;  // before the window (warm-up before the first step)
      if (!st->busy.open)
        attribute_gap(st->idle, l, begin, s, h.launch_ns);
      else if (s > st->busy.seg_end)
        attribute_gap(st->idle, l, st->busy.seg_end, s, h.launch_ns);
      st->busy.add(s, e);
      if (h.type == HeldType::Kernel) {
        st->kernel.add(s, e);
        st->kernel_or_memcpy.add(s, e);
        (h.communication ? st->communication : st->compute).add(s, e);
      } else if (h.type == HeldType::Memcpy) {
        st->memcpy.add(s, e);
        st->kernel_or_memcpy.add(s, e);
      }
    }
    if (st) st->swept_start = std::max(st->swept_start, latest);
  }

  void fold(const OpInstance& op) {
    EligibleOpStats& s = ops[op.key];
    s.tensor_core_ns += op.tensor_core_ns;
    s.cuda_core_ns += op.cuda_core_ns;
    s.unknown_ns += op.unknown_ns;
    if (op.kernels > 0) {
      ++s.with_kernels;
      if (op.tensor_core_kernels == 0 && op.unknown_kernels == 0) ++s.only_cuda_cores;
    }
  }

  // Forgets the host records of the generation before last.
  void next_generation() {
    ++generation;
    host_added = 0;
    const std::size_t g = cur();  // now holds the oldest generation: reuse it
    for (const OpInstance& op : op_instances[g]) fold(op);
    op_instances[g].clear();
    op_by_external_id[g].clear();
    launches[g].clear();
    const std::uint32_t keep_from = generation - 1;
    std::erase_if(ranges, [&](const PhaseRange& r) { return r.generation < keep_from; });
    std::erase_if(host_syncs, [&](const HostSpan& s) { return s.generation < keep_from; });
  }

  void sweep() {
    if (!held.empty()) {
      const Lookup l = build_lookup();
      for (HeldGpu& h : held) attribute(h, l);
      sweep_timeline(l);
      held.clear();
    }
    next_generation();
  }

  GpuAggregate snapshot() {
    // Sweep what is held, but keep the host records: later GPU records may still need them.
    if (!held.empty()) {
      const Lookup l = build_lookup();
      for (HeldGpu& h : held) attribute(h, l);
      sweep_timeline(l);
      held.clear();
    }
    GpuAggregate a;
    a.devices = devices;
    a.kernels = kernels;
    a.memcpys = memcpys;
    a.memsets = memsets;
    a.syncs = syncs;
    a.runtime_calls = runtime_calls;
    a.phases = phases;
    a.records = records;
    a.dropped_records = dropped;
    a.late_records = late;
    a.folded_kernel_names = folded_names;
    a.folded_op_keys = folded_ops;
    a.steps = steps;
    a.step_ns = step_ns;
    a.window_from_steps = steps > 0;
    if (min_time <= max_time) {
      a.window_begin_ns = window_begin();
      a.window_end_ns = window_end();
    }
    // Pending op instances count as they stand.
    const std::vector<EligibleOpStats> saved = ops;
    for (const auto& gen : op_instances)
      for (const OpInstance& op : gen) fold(op);
    a.eligible_ops = ops;
    a.op_dtypes_recorded = op_dtypes;
    ops = saved;

    const Lookup l = build_lookup();
    for (const DeviceState& st : timelines) {
      DeviceTimelineStats t;
      t.device = st.device;
      t.busy_ns = st.busy.total();
      t.kernel_ns = st.kernel.total();
      t.compute_ns = st.compute.total();
      t.communication_ns = st.communication.total();
      t.memcpy_ns = st.memcpy.total();
      t.kernel_or_memcpy_ns = st.kernel_or_memcpy.total();
      t.idle = st.idle;
      if (st.busy.open) attribute_gap(t.idle, l, st.busy.seg_end, a.window_end_ns, kNever);
      t.idle_ns = std::max<std::int64_t>(0, a.window_ns() - t.busy_ns);
      const std::int64_t known = t.idle.data_wait_ns + t.idle.sync_ns + t.idle.host_launch_ns;
      t.idle.other_ns = std::max<std::int64_t>(0, t.idle_ns - known);
      a.timelines.push_back(t);
    }
    std::sort(a.timelines.begin(), a.timelines.end(),
              [](const DeviceTimelineStats& x, const DeviceTimelineStats& y) {
                return x.device < y.device;
              });
    return a;
  }
};

GpuAggregator::GpuAggregator(AggregatorLimits limits) : impl_(std::make_unique<Impl>(limits)) {}
GpuAggregator::~GpuAggregator() = default;
GpuAggregator::GpuAggregator(GpuAggregator&&) noexcept = default;
GpuAggregator& GpuAggregator::operator=(GpuAggregator&&) noexcept = default;

void GpuAggregator::add(const DeviceProperties& r) noexcept {
  impl_->guarded([&] {
    auto& d = impl_->devices;
    if (std::none_of(d.begin(), d.end(), [&](const DeviceProperties& x) { return x.id == r.id; }))
      d.push_back(r);
  });
}
void GpuAggregator::add(const KernelRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_kernel(r); });
}
void GpuAggregator::add(const MemcpyRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_memcpy(r); });
}
void GpuAggregator::add(const MemsetRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_memset(r); });
}
void GpuAggregator::add(const SyncRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_sync(r); });
}
void GpuAggregator::add(const RuntimeCallRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_runtime(r); });
}
void GpuAggregator::add(const OpRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_op(r); });
}
void GpuAggregator::add(const AnnotationRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_annotation(r); });
}

void GpuAggregator::add(const GpuActivity& batch) noexcept {
  for (const auto& r : batch.devices) add(r);
  for (const auto& r : batch.annotations) add(r);
  for (const auto& r : batch.ops) add(r);
  for (const auto& r : batch.runtime_calls) add(r);
  for (const auto& r : batch.syncs) add(r);
  for (const auto& r : batch.kernels) add(r);
  for (const auto& r : batch.memcpys) add(r);
  for (const auto& r : batch.memsets) add(r);
  add_dropped(batch.dropped_records);
}

void GpuAggregator::add_dropped(std::int64_t n) noexcept {
  if (n > 0) impl_->dropped += n;
}

void GpuAggregator::flush() noexcept {
  try {
    impl_->sweep();
  } catch (...) {
    // Out of memory while sorting: the held records are lost, and counted.
    impl_->dropped += static_cast<std::int64_t>(impl_->held.size());
    impl_->held.clear();
  }
}

GpuAggregate GpuAggregator::snapshot() { return impl_->snapshot(); }

std::size_t GpuAggregator::held_records() const noexcept {
  return impl_->held.size() + impl_->host_held();
}

bool is_launch_call(std::string_view name) noexcept {
  auto has = [&](std::string_view t) { return name.find(t) != std::string_view::npos; };
  return has("LaunchKernel") || has("cuLaunch") || has("LaunchCooperativeKernel") ||
         has("GraphLaunch");
}

bool is_host_sync_call(std::string_view name) noexcept {
  if (name.find("Synchronize") != std::string_view::npos) return true;
  // cudaMemcpy / cuMemcpyDtoH...: the synchronous copies block the host until they are done.
  const bool copy = name.substr(0, 10) == "cudaMemcpy" || name.substr(0, 8) == "cuMemcpy";
  return copy && name.find("Async") == std::string_view::npos;
}

GpuAggregate aggregate(const GpuActivity& activity) {
  // Everything is in memory already: one sweep sees every record's neighbours.
  AggregatorLimits limits;
  const std::size_t gpu =
      activity.kernels.size() + activity.memcpys.size() + activity.memsets.size();
  const std::size_t host = activity.runtime_calls.size() + activity.ops.size() +
                           activity.annotations.size() + activity.syncs.size();
  limits.window_records = std::max(limits.window_records, gpu + 1);
  limits.host_records = std::max(limits.host_records, 2 * host + 2);
  GpuAggregator agg(limits);
  agg.add(activity);
  return agg.snapshot();
}

}  // namespace fathom
