// Trace Event Format: "X" (complete) events with microsecond ts / dur, "M" metadata events naming
// processes and threads, "i" instant events. pid 1 is the host, pid 2 + device the GPUs; on the
// GPU, tid is the stream.
#include "report/chrome_trace.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "analyze/transfer_analysis.h"

namespace fathom {
namespace {

using nlohmann::json;

constexpr int kHostPid = 1;
constexpr int kGpuPidBase = 2;
enum HostTid {
  kStepsTid = 1,
  kPhasesTid = 2,
  kCopiesTid = 3,
  kRuntimeTid = 4,
  kOpsTid = 5,
  kAnnotationsTid = 6
};

class Builder {
 public:
  explicit Builder(json& events) : events_(events) {}

  void complete(std::string_view name, std::string_view cat, int pid, std::int64_t tid,
                std::int64_t start_ns, std::int64_t end_ns, std::int64_t origin_ns,
                json args = json::object()) {
    json e = {{"name", name},
              {"cat", cat},
              {"ph", "X"},
              {"pid", pid},
              {"tid", tid},
              {"ts", (start_ns - origin_ns) / 1000.0},
              {"dur", std::max<std::int64_t>(end_ns - start_ns, 0) / 1000.0}};
    if (!args.empty()) e["args"] = std::move(args);
    events_.push_back(std::move(e));
  }

  void process_name(int pid, std::string_view name, int sort_index) {
    events_.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}});
    events_.push_back({{"name", "process_sort_index"},
                       {"ph", "M"},
                       {"pid", pid},
                       {"args", {{"sort_index", sort_index}}}});
  }

  void thread_name(int pid, std::int64_t tid, std::string_view name) {
    events_.push_back({{"name", "thread_name"},
                       {"ph", "M"},
                       {"pid", pid},
                       {"tid", tid},
                       {"args", {{"name", name}}}});
  }

 private:
  json& events_;
};

// field may be a member of R's base (GpuSpan::start_ns for a kernel): F is its own parameter.
template <typename R, typename F>
void min_start(std::int64_t& m, std::span<const R> rs, std::int64_t F::*field) {
  for (const R& r : rs) m = std::min(m, r.*field);
}

}  // namespace

// Nsight Systems' names for copies, so the two timelines read alike.
std::string memcpy_event_name(MemcpyKind k) {
  if (k == MemcpyKind::Unknown) return "Memcpy";
  return "Memcpy " + std::string(memcpy_kind_name(k));
}

std::string gpu_process_name(std::int32_t device, const std::vector<DeviceProperties>& devices) {
  std::string name = "GPU " + std::to_string(device);
  for (const DeviceProperties& p : devices)
    if (p.id == device && !p.name.empty()) name += " (" + p.name + ")";
  return name;
}

std::string format_chrome_trace(const TraceInput& in) {
  json events = json::array();
  Builder b(events);
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();

  std::int64_t host0 = kNone;
  min_start(host0, in.steps, &StepRecord::begin_ns);
  min_start(host0, in.phases, &PhaseRecord::begin_ns);
  min_start(host0, in.copies, &CopyRecord::begin_ns);
  const GpuActivity* g = in.gpu;
  std::int64_t gpu0 = kNone;
  if (g) {
    min_start(gpu0, std::span<const KernelRecord>(g->kernels), &KernelRecord::start_ns);
    min_start(gpu0, std::span<const MemcpyRecord>(g->memcpys), &MemcpyRecord::start_ns);
    min_start(gpu0, std::span<const MemsetRecord>(g->memsets), &MemsetRecord::start_ns);
    min_start(gpu0, std::span<const SyncRecord>(g->syncs), &SyncRecord::start_ns);
    min_start(gpu0, std::span<const RuntimeCallRecord>(g->runtime_calls),
              &RuntimeCallRecord::start_ns);
    min_start(gpu0, std::span<const OpRecord>(g->ops), &OpRecord::start_ns);
    min_start(gpu0, std::span<const AnnotationRecord>(g->annotations), &AnnotationRecord::start_ns);
  }
  // One origin when the clocks are aligned; otherwise each clock starts at its own zero.
  std::int64_t host_origin = host0 == kNone ? 0 : host0;
  std::int64_t gpu_origin = gpu0 == kNone ? 0 : gpu0;
  if (in.gpu_to_host_ns && gpu0 != kNone) {
    const std::int64_t gpu0_on_host = gpu0 + *in.gpu_to_host_ns;
    const std::int64_t common = host0 == kNone ? gpu0_on_host : std::min(host0, gpu0_on_host);
    host_origin = common;
    gpu_origin = common - *in.gpu_to_host_ns;
  }

  b.process_name(kHostPid, in.process_name + " (host)", 0);
  if (!in.steps.empty()) b.thread_name(kHostPid, kStepsTid, "steps");
  if (!in.phases.empty()) b.thread_name(kHostPid, kPhasesTid, "phases");
  if (!in.copies.empty()) b.thread_name(kHostPid, kCopiesTid, "copies (fathom helper)");
  for (const StepRecord& s : in.steps)
    b.complete("step " + std::to_string(s.index), "step", kHostPid, kStepsTid, s.begin_ns, s.end_ns,
               host_origin, {{"samples", s.samples}, {"failed", s.failed}});
  for (const PhaseRecord& p : in.phases) {
    json args = {{"step", p.step}, {"aborted", p.aborted}, {"inferred", p.inferred}};
    if (p.device_ms) args["device_ms"] = *p.device_ms;
    if (p.device_memory) args["peak_allocated_bytes"] = p.device_memory->peak_allocated_bytes;
    b.complete(phase_name(p.phase), "phase", kHostPid, kPhasesTid, p.begin_ns, p.end_ns,
               host_origin, std::move(args));
  }
  for (const CopyRecord& c : in.copies)
    b.complete(copy_direction_name(c.direction), "copy", kHostPid, kCopiesTid, c.begin_ns, c.end_ns,
               host_origin,
               {{"bytes", c.bytes},
                {"pinned", c.pinned},
                {"non_blocking", c.non_blocking},
                {"step", c.step}});

  if (g) {
    if (!g->runtime_calls.empty()) b.thread_name(kHostPid, kRuntimeTid, "CUDA runtime");
    if (!g->ops.empty()) b.thread_name(kHostPid, kOpsTid, "ATen ops");
    if (!g->annotations.empty()) b.thread_name(kHostPid, kAnnotationsTid, "annotations");
    for (const RuntimeCallRecord& r : g->runtime_calls)
      b.complete(r.name, "cuda_runtime", kHostPid, kRuntimeTid, r.start_ns, r.end_ns, gpu_origin,
                 {{"correlation", r.correlation_id}});
    for (const OpRecord& o : g->ops) {
      json shapes = o.input_shapes;
      b.complete(o.name, "cpu_op", kHostPid, kOpsTid, o.start_ns, o.end_ns, gpu_origin,
                 {{"sequence_nr", o.sequence_nr},
                  {"input_shapes", shapes},
                  {"input_dtypes", o.input_dtypes}});
    }
    for (const AnnotationRecord& a : g->annotations)
      b.complete(a.name, "user_annotation", kHostPid, kAnnotationsTid, a.start_ns, a.end_ns,
                 gpu_origin);
    for (const SyncRecord& s : g->syncs)
      b.complete("synchronize", "cuda_sync", kHostPid, kRuntimeTid, s.start_ns, s.end_ns,
                 gpu_origin, {{"stream", s.stream}, {"correlation", s.correlation_id}});

    std::set<std::int32_t> devices;
    std::set<std::pair<std::int32_t, std::int32_t>> streams;
    auto track = [&](std::int32_t device, std::int32_t stream) {
      devices.insert(device);
      streams.insert({device, stream});
      return kGpuPidBase + device;
    };
    for (const KernelRecord& k : g->kernels) {
      const int pid = track(k.device, k.stream);
      b.complete(k.name, "kernel", pid, k.stream, k.start_ns, k.end_ns, gpu_origin,
                 {{"correlation", k.correlation_id},
                  {"grid", {k.grid_x, k.grid_y, k.grid_z}},
                  {"block", {k.block_x, k.block_y, k.block_z}}});
    }
    for (const MemcpyRecord& m : g->memcpys) {
      const int pid = track(m.device, m.stream);
      b.complete(memcpy_event_name(m.kind), "gpu_memcpy", pid, m.stream, m.start_ns, m.end_ns,
                 gpu_origin,
                 {{"bytes", m.bytes},
                  {"src", memory_kind_name(m.src)},
                  {"dst", memory_kind_name(m.dst)},
                  {"async", m.async},
                  {"correlation", m.correlation_id}});
    }
    for (const MemsetRecord& m : g->memsets) {
      const int pid = track(m.device, m.stream);
      b.complete("Memset", "gpu_memset", pid, m.stream, m.start_ns, m.end_ns, gpu_origin,
                 {{"bytes", m.bytes}});
    }
    for (std::int32_t d : devices)
      b.process_name(kGpuPidBase + d, gpu_process_name(d, g->devices), 1 + d);
    for (const auto& [d, s] : streams)
      b.thread_name(kGpuPidBase + d, s, "stream " + std::to_string(s));
  }

  json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  json meta = {{"generator", "fathom"}};
  if (g && !in.gpu_to_host_ns && gpu0 != kNone && host0 != kNone)
    meta["clocks"] = "host and GPU timestamps come from different clocks: each starts at 0 here";
  if (g && g->dropped_records > 0) meta["dropped_gpu_records"] = g->dropped_records;
  trace["otherData"] = std::move(meta);
  // Names come from drivers and traces: invalid UTF-8 is replaced rather than failing the export.
  return trace.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace fathom
