// The GPU section of the report as JSON (docs/report-schema.md, "gpu"). Times are integer
// nanoseconds, shares are fractions (0..1); a value that was not measured is null, never 0.
#include "report/gpu_summary_json.h"

#include <fathom/error.h>
#include <fmt/format.h>

#include <array>

#include "analyze/transfer_analysis.h"
#include "base/json_number.h"
#include "report/json_helpers.h"
#include <fathom/report_writers.h>

namespace fathom::detail {
namespace {

using nlohmann::json;

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

void get(const json& j, const char* key, std::optional<double>& v) {
  const json& x = j.at(key);
  v = x.is_null() ? std::nullopt : std::optional<double>(x.get<double>());
}

// Integers through json_integer: a number out of the field's range is an error, not a wrap.
template <typename T>
void read_into(const json& x, T& v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    v = detail::json_integer<T>(x);
  else
    x.get_to(v);
}

template <typename T>
void get(const json& j, const char* key, T& v) {
  read_into(j.at(key), v);
}

// Fields added after version 1 was first written: absent in older files, which keep the default.
template <typename T>
void get_if(const json& j, const char* key, T& v) {
  if (auto it = j.find(key); it != j.end() && !it->is_null()) read_into(*it, v);
}

void get_if(const json& j, const char* key, std::optional<double>& v) {
  if (auto it = j.find(key); it != j.end())
    v = it->is_null() ? std::nullopt : std::optional<double>(it->get<double>());
}

json decided_json(const DecidedTime& t) { return {{"count", t.count}, {"ns", t.ns}}; }

void get_if(const json& j, const char* key, DecidedTime& t) {
  if (auto it = j.find(key); it != j.end()) {
    get(*it, "count", t.count);
    get(*it, "ns", t.ns);
  }
}

constexpr std::array kMemcpyKinds{MemcpyKind::Unknown,      MemcpyKind::HostToDevice,
                                  MemcpyKind::DeviceToHost, MemcpyKind::DeviceToDevice,
                                  MemcpyKind::HostToHost,   MemcpyKind::PeerToPeer};
constexpr std::array kMemoryKinds{MemoryKind::Unknown, MemoryKind::Pageable, MemoryKind::Pinned,
                                  MemoryKind::Device, MemoryKind::Managed};

MemcpyKind memcpy_kind_from(const json& j) {
  const auto s = j.get<std::string>();
  for (MemcpyKind k : kMemcpyKinds)
    if (memcpy_kind_name(k) == s) return k;
  throw Error(fmt::format("unknown copy direction '{}'", s));
}

MemoryKind memory_kind_from(const json& j) {
  const auto s = j.get<std::string>();
  for (MemoryKind k : kMemoryKinds)
    if (memory_kind_name(k) == s) return k;
  throw Error(fmt::format("unknown memory kind '{}'", s));
}

json op_json(const EligibleOp& o) {
  return {{"op", o.op},
          {"shapes", o.shapes},
          {"dtypes", o.dtypes},
          {"misaligned", o.misaligned},
          {"instances", o.instances},
          {"only_cuda_cores", o.only_cuda_cores},
          {"tensor_core_ns", o.tensor_core_ns},
          {"cuda_core_ns", o.cuda_core_ns}};
}

EligibleOp op_from(const json& j) {
  EligibleOp o;
  get(j, "op", o.op);
  get(j, "shapes", o.shapes);
  get(j, "dtypes", o.dtypes);
  get(j, "misaligned", o.misaligned);
  get(j, "instances", o.instances);
  get(j, "only_cuda_cores", o.only_cuda_cores);
  get(j, "tensor_core_ns", o.tensor_core_ns);
  get(j, "cuda_core_ns", o.cuda_core_ns);
  return o;
}

json tensor_cores_json(const TensorCoreResult& r) {
  json phases = json::array(), families = json::array(), top = json::array(),
       on_cuda = json::array(), misaligned = json::array();
  for (const auto& p : r.phases)
    phases.push_back({{"phase", p.phase},
                      {"kernel_ns", p.kernel_ns},
                      {"tensor_core_ns", p.tensor_core_ns},
                      {"share", opt(p.share)},
                      {"unknown_ns", p.unknown_ns}});
  for (const auto& f : r.families)
    families.push_back({{"family", f.family},
                        {"tensor_core", f.tensor_core},
                        {"decision", f.decision},
                        {"count", f.count},
                        {"total_ns", f.total_ns},
                        {"tensor_core_by_op_ns", f.tensor_core_by_op_ns}});
  for (const auto& k : r.top_kernels)
    top.push_back({{"name", k.name},
                   {"family", k.family},
                   {"tensor_core", k.tensor_core},
                   {"communication", k.communication},
                   {"precision", k.precision},
                   {"decision", k.decision},
                   {"count", k.count},
                   {"total_ns", k.total_ns},
                   {"tensor_core_by_op_ns", k.tensor_core_by_op_ns}});
  const TensorCoreDecisions& d = r.decisions;
  for (const auto& o : r.on_cuda_cores) on_cuda.push_back(op_json(o));
  for (const auto& o : r.misaligned) misaligned.push_back(op_json(o));
  return {{"kernel_count", r.kernel_count},
          {"kernel_ns", r.kernel_ns},
          {"tensor_core_count", r.tensor_core_count},
          {"tensor_core_ns", r.tensor_core_ns},
          {"share", opt(r.share)},
          {"decisions",
           {{"tensor_cores_by_name", decided_json(d.tensor_cores_by_name)},
            {"cuda_cores_by_name", decided_json(d.cuda_cores_by_name)},
            {"tensor_cores_by_op", decided_json(d.tensor_cores_by_op)},
            {"unknown", decided_json(d.unknown)},
            {"unknown_without_capability", decided_json(d.unknown_without_capability)}}},
          {"unknown_share", opt(r.unknown_share)},
          {"op_dtypes_recorded", r.op_dtypes_recorded},
          {"phases", phases},
          {"families", families},
          {"top_kernels", top},
          {"ops_recorded", r.ops_recorded},
          {"eligible_instances", r.eligible_instances},
          {"eligible_with_kernels", r.eligible_with_kernels},
          {"eligible_only_cuda_cores", r.eligible_only_cuda_cores},
          {"eligible_cuda_core_ns", r.eligible_cuda_core_ns},
          {"eligible_unknown_ns", r.eligible_unknown_ns},
          {"on_cuda_cores", on_cuda},
          {"misaligned", misaligned}};
}

TensorCoreResult tensor_cores_from(const json& j) {
  TensorCoreResult r;
  get(j, "kernel_count", r.kernel_count);
  get(j, "kernel_ns", r.kernel_ns);
  get(j, "tensor_core_count", r.tensor_core_count);
  get(j, "tensor_core_ns", r.tensor_core_ns);
  get(j, "share", r.share);
  if (auto d = j.find("decisions"); d != j.end()) {
    get_if(*d, "tensor_cores_by_name", r.decisions.tensor_cores_by_name);
    get_if(*d, "cuda_cores_by_name", r.decisions.cuda_cores_by_name);
    get_if(*d, "tensor_cores_by_op", r.decisions.tensor_cores_by_op);
    get_if(*d, "unknown", r.decisions.unknown);
    get_if(*d, "unknown_without_capability", r.decisions.unknown_without_capability);
  } else {
    // Written before fathom told unknown kernels apart: it counted them as CUDA cores.
    r.decisions.tensor_cores_by_name = {r.tensor_core_count, r.tensor_core_ns};
    r.decisions.cuda_cores_by_name = {r.kernel_count - r.tensor_core_count,
                                      r.kernel_ns - r.tensor_core_ns};
  }
  get_if(j, "unknown_share", r.unknown_share);
  get_if(j, "op_dtypes_recorded", r.op_dtypes_recorded);
  for (const json& p : j.at("phases")) {
    PhaseTensorCores x;
    get(p, "phase", x.phase);
    get(p, "kernel_ns", x.kernel_ns);
    get(p, "tensor_core_ns", x.tensor_core_ns);
    get(p, "share", x.share);
    get_if(p, "unknown_ns", x.unknown_ns);
    r.phases.push_back(x);
  }
  for (const json& f : j.at("families")) {
    KernelFamilyTime x;
    get(f, "family", x.family);
    get(f, "tensor_core", x.tensor_core);
    get_if(f, "decision", x.decision);
    get(f, "count", x.count);
    get(f, "total_ns", x.total_ns);
    get_if(f, "tensor_core_by_op_ns", x.tensor_core_by_op_ns);
    r.families.push_back(x);
  }
  for (const json& k : j.at("top_kernels")) {
    TopKernel x;
    get(k, "name", x.name);
    get(k, "family", x.family);
    get(k, "tensor_core", x.tensor_core);
    get(k, "communication", x.communication);
    get(k, "precision", x.precision);
    get_if(k, "decision", x.decision);
    get(k, "count", x.count);
    get(k, "total_ns", x.total_ns);
    get_if(k, "tensor_core_by_op_ns", x.tensor_core_by_op_ns);
    r.top_kernels.push_back(x);
  }
  get(j, "ops_recorded", r.ops_recorded);
  get(j, "eligible_instances", r.eligible_instances);
  get(j, "eligible_with_kernels", r.eligible_with_kernels);
  get(j, "eligible_only_cuda_cores", r.eligible_only_cuda_cores);
  get(j, "eligible_cuda_core_ns", r.eligible_cuda_core_ns);
  get_if(j, "eligible_unknown_ns", r.eligible_unknown_ns);
  for (const json& o : j.at("on_cuda_cores")) r.on_cuda_cores.push_back(op_from(o));
  for (const json& o : j.at("misaligned")) r.misaligned.push_back(op_from(o));
  return r;
}

json transfers_json(const TransferResult& r) {
  json directions = json::array(), rows = json::array();
  for (const auto& d : r.directions)
    directions.push_back({{"direction", std::string(memcpy_kind_name(d.direction))},
                          {"count", d.count},
                          {"bytes", d.bytes},
                          {"total_ns", d.total_ns},
                          {"pageable_count", d.pageable_count},
                          {"pageable_bytes", d.pageable_bytes},
                          {"pinned_count", d.pinned_count},
                          {"pinned_bytes", d.pinned_bytes},
                          {"sync_count", d.sync_count},
                          {"sync_bytes", d.sync_bytes},
                          {"async_count", d.async_count},
                          {"async_bytes", d.async_bytes},
                          {"unknown_call_count", d.unknown_call_count},
                          {"unknown_call_bytes", d.unknown_call_bytes},
                          {"gb_per_s", opt(d.gb_per_s)},
                          {"share_of_peak", opt(d.share_of_peak)}});
  for (const auto& w : r.rows)
    rows.push_back({{"direction", std::string(memcpy_kind_name(w.direction))},
                    {"host_memory", std::string(memory_kind_name(w.host_memory))},
                    {"async", w.async},
                    {"async_known", w.async_known},
                    {"count", w.count},
                    {"bytes", w.bytes},
                    {"total_ns", w.total_ns},
                    {"gb_per_s", opt(w.gb_per_s)},
                    {"share_of_peak", opt(w.share_of_peak)}});
  json phases = json::array();
  for (const auto& p : r.phases)
    phases.push_back(
        {{"phase", p.phase}, {"count", p.count}, {"bytes", p.bytes}, {"total_ns", p.total_ns}});
  return {{"link", {{"gb_per_s", opt(r.link.gb_per_s)}, {"description", r.link.description}}},
          {"count", r.count},
          {"bytes", r.bytes},
          {"total_ns", r.total_ns},
          {"busy_ns", r.busy_ns},
          {"overlap_with_kernels_ns", r.overlap_with_kernels_ns},
          {"overlap_share", opt(r.overlap_share)},
          {"window_ns", r.window_ns},
          {"share_of_window", opt(r.share_of_window)},
          {"pageable_async_count", r.pageable_async_count},
          {"large_sync_h2d_count", r.large_sync_h2d_count},
          {"directions", directions},
          {"rows", rows},
          {"phases", phases}};
}

TransferResult transfers_from(const json& j) {
  TransferResult r;
  get(j.at("link"), "gb_per_s", r.link.gb_per_s);
  get(j.at("link"), "description", r.link.description);
  get(j, "count", r.count);
  get(j, "bytes", r.bytes);
  get(j, "total_ns", r.total_ns);
  get(j, "busy_ns", r.busy_ns);
  get(j, "overlap_with_kernels_ns", r.overlap_with_kernels_ns);
  get(j, "overlap_share", r.overlap_share);
  get(j, "window_ns", r.window_ns);
  get(j, "share_of_window", r.share_of_window);
  get(j, "pageable_async_count", r.pageable_async_count);
  get(j, "large_sync_h2d_count", r.large_sync_h2d_count);
  for (const json& d : j.at("directions")) {
    TransferDirection x;
    x.direction = memcpy_kind_from(d.at("direction"));
    get(d, "count", x.count);
    get(d, "bytes", x.bytes);
    get(d, "total_ns", x.total_ns);
    get(d, "pageable_count", x.pageable_count);
    get(d, "pageable_bytes", x.pageable_bytes);
    get(d, "pinned_count", x.pinned_count);
    get(d, "pinned_bytes", x.pinned_bytes);
    get(d, "sync_count", x.sync_count);
    get(d, "sync_bytes", x.sync_bytes);
    get(d, "async_count", x.async_count);
    get(d, "async_bytes", x.async_bytes);
    get_if(d, "unknown_call_count", x.unknown_call_count);
    get_if(d, "unknown_call_bytes", x.unknown_call_bytes);
    get(d, "gb_per_s", x.gb_per_s);
    get(d, "share_of_peak", x.share_of_peak);
    r.directions.push_back(x);
  }
  for (const json& w : j.at("rows")) {
    TransferRow x;
    x.direction = memcpy_kind_from(w.at("direction"));
    x.host_memory = memory_kind_from(w.at("host_memory"));
    get(w, "async", x.async);
    get_if(w, "async_known", x.async_known);
    get(w, "count", x.count);
    get(w, "bytes", x.bytes);
    get(w, "total_ns", x.total_ns);
    get(w, "gb_per_s", x.gb_per_s);
    get(w, "share_of_peak", x.share_of_peak);
    r.rows.push_back(x);
  }
  if (j.contains("phases"))  // schema 1 reports before the per-phase rows
    for (const json& p : j.at("phases")) {
      PhaseTransfers x;
      get(p, "phase", x.phase);
      get(p, "count", x.count);
      get(p, "bytes", x.bytes);
      get(p, "total_ns", x.total_ns);
      r.phases.push_back(x);
    }
  return r;
}

json steps_json(const GpuSummary& s) {
  json out = json::array();
  for (const StepGpu& g : s.steps)
    out.push_back({{"name", g.name},
                   {"wall_ns", g.wall_ns},
                   {"kernel_count", g.kernel_count},
                   {"kernel_ns", g.kernel_ns},
                   {"tensor_core_ns", g.tensor_core_ns},
                   {"tensor_core_share", opt(g.tensor_core_share)},
                   {"communication_ns", g.communication_ns},
                   {"memcpy_count", g.memcpy_count},
                   {"memcpy_bytes", g.memcpy_bytes},
                   {"memcpy_ns", g.memcpy_ns},
                   {"busy_ns", g.busy_ns},
                   {"idle_ns", g.idle_ns},
                   {"busy_share", opt(g.busy_share)}});
  return out;
}

void steps_from(const json& j, GpuSummary& s) {
  if (!j.contains("steps")) return;
  for (const json& x : j.at("steps")) {
    StepGpu g;
    get(x, "name", g.name);
    get(x, "wall_ns", g.wall_ns);
    get(x, "kernel_count", g.kernel_count);
    get(x, "kernel_ns", g.kernel_ns);
    get(x, "tensor_core_ns", g.tensor_core_ns);
    get(x, "tensor_core_share", g.tensor_core_share);
    get(x, "communication_ns", g.communication_ns);
    get(x, "memcpy_count", g.memcpy_count);
    get(x, "memcpy_bytes", g.memcpy_bytes);
    get(x, "memcpy_ns", g.memcpy_ns);
    get(x, "busy_ns", g.busy_ns);
    get(x, "idle_ns", g.idle_ns);
    get(x, "busy_share", g.busy_share);
    s.steps.push_back(std::move(g));
  }
  get_if(j, "steps_not_listed", s.steps_not_listed);
}

json timeline_json(const TimelineResult& r) {
  json devices = json::array();
  for (const auto& d : r.devices)
    devices.push_back({{"device", d.device},
                       {"busy_ns", d.busy_ns},
                       {"idle_ns", d.idle_ns},
                       {"busy_share", opt(d.busy_share)},
                       {"idle",
                        {{"data_wait_ns", d.idle.data_wait_ns},
                         {"sync_ns", d.idle.sync_ns},
                         {"host_launch_ns", d.idle.host_launch_ns},
                         {"other_ns", d.idle.other_ns},
                         {"gaps", d.idle.gaps}}},
                       {"kernel_ns", d.kernel_ns},
                       {"communication_ns", d.communication_ns},
                       {"communication_overlap_ns", d.communication_overlap_ns},
                       {"communication_overlap_share", opt(d.communication_overlap_share)}});
  return {{"window_ns", r.window_ns},
          {"window_from_steps", r.window_from_steps},
          {"steps", r.steps},
          {"kernel_count", r.kernel_count},
          {"tiny_kernel_count", r.tiny_kernel_count},
          {"tiny_kernel_ns", r.tiny_kernel_ns},
          {"tiny_count_share", opt(r.tiny_count_share)},
          {"tiny_time_share", opt(r.tiny_time_share)},
          {"communication_kernels", r.communication_kernels},
          {"communication_ns", r.communication_ns},
          {"communication_share", opt(r.communication_share)},
          {"launch_calls", r.launch_calls},
          {"sync_calls", r.sync_calls},
          {"sync_call_ns", r.sync_call_ns},
          {"sync_records", r.sync_records},
          {"sync_record_ns", r.sync_record_ns},
          {"launches_recorded", r.launches_recorded},
          {"late_records", r.late_records},
          {"devices", devices}};
}

TimelineResult timeline_from(const json& j) {
  TimelineResult r;
  get(j, "window_ns", r.window_ns);
  get(j, "window_from_steps", r.window_from_steps);
  get(j, "steps", r.steps);
  get(j, "kernel_count", r.kernel_count);
  get(j, "tiny_kernel_count", r.tiny_kernel_count);
  get(j, "tiny_kernel_ns", r.tiny_kernel_ns);
  get(j, "tiny_count_share", r.tiny_count_share);
  get(j, "tiny_time_share", r.tiny_time_share);
  get(j, "communication_kernels", r.communication_kernels);
  get(j, "communication_ns", r.communication_ns);
  get(j, "communication_share", r.communication_share);
  get(j, "launch_calls", r.launch_calls);
  get(j, "sync_calls", r.sync_calls);
  get(j, "sync_call_ns", r.sync_call_ns);
  get(j, "sync_records", r.sync_records);
  get(j, "sync_record_ns", r.sync_record_ns);
  get(j, "launches_recorded", r.launches_recorded);
  get(j, "late_records", r.late_records);
  for (const json& d : j.at("devices")) {
    DeviceTimeline x;
    get(d, "device", x.device);
    get(d, "busy_ns", x.busy_ns);
    get(d, "idle_ns", x.idle_ns);
    get(d, "busy_share", x.busy_share);
    const json& idle = d.at("idle");
    get(idle, "data_wait_ns", x.idle.data_wait_ns);
    get(idle, "sync_ns", x.idle.sync_ns);
    get(idle, "host_launch_ns", x.idle.host_launch_ns);
    get(idle, "other_ns", x.idle.other_ns);
    get(idle, "gaps", x.idle.gaps);
    get(d, "kernel_ns", x.kernel_ns);
    get(d, "communication_ns", x.communication_ns);
    get(d, "communication_overlap_ns", x.communication_overlap_ns);
    get(d, "communication_overlap_share", x.communication_overlap_share);
    r.devices.push_back(x);
  }
  return r;
}

}  // namespace

json gpu_summary_to_json(const GpuSummary& s) {
  json devices = json::array(), not_measured = json::array();
  for (const auto& d : s.devices)
    devices.push_back({{"id", d.id},
                       {"name", d.name},
                       {"compute_major", d.compute_major},
                       {"compute_minor", d.compute_minor},
                       {"total_memory_bytes", d.total_memory_bytes}});
  for (const auto& u : s.not_measured) not_measured.push_back(unmeasured_json(u));
  // Without GPU activity the analyses are null, not a row of zeros that reads like a measurement.
  return {{"source", s.source},
          {"gpu_activity", s.gpu_activity},
          {"devices", devices},
          {"records", s.records},
          {"dropped_records", s.dropped_records},
          {"tensor_cores", s.gpu_activity ? tensor_cores_json(s.tensor_cores) : json(nullptr)},
          {"transfers", s.gpu_activity ? transfers_json(s.transfers) : json(nullptr)},
          {"timeline", s.gpu_activity ? timeline_json(s.timeline) : json(nullptr)},
          {"steps", steps_json(s)},
          {"steps_not_listed", s.steps_not_listed},
          {"not_measured", not_measured}};
}

GpuSummary gpu_summary_from_json(const json& j) {
  GpuSummary s;
  get(j, "source", s.source);
  get(j, "gpu_activity", s.gpu_activity);
  for (const json& d : j.at("devices")) {
    DeviceProperties p;
    get(d, "id", p.id);
    get(d, "name", p.name);
    get(d, "compute_major", p.compute_major);
    get(d, "compute_minor", p.compute_minor);
    get(d, "total_memory_bytes", p.total_memory_bytes);
    s.devices.push_back(p);
  }
  get(j, "records", s.records);
  get(j, "dropped_records", s.dropped_records);
  if (!j.at("tensor_cores").is_null()) s.tensor_cores = tensor_cores_from(j.at("tensor_cores"));
  if (!j.at("transfers").is_null()) s.transfers = transfers_from(j.at("transfers"));
  if (!j.at("timeline").is_null()) s.timeline = timeline_from(j.at("timeline"));
  steps_from(j, s);
  for (const json& u : j.at("not_measured")) s.not_measured.push_back(unmeasured_from(u));
  return s;
}

}  // namespace fathom::detail

namespace fathom {

std::string format_gpu_summary_json(const GpuSummary& s) {
  return detail::gpu_summary_to_json(s).dump(2) + "\n";
}

std::string format_gpu_analysis_json(const GpuSummary& s, const std::string& input_path) {
  const nlohmann::json j = {{"schema", "fathom.analysis"},
                            {"schema_version", kAnalysisSchemaVersion},
                            {"input", input_path},
                            {"gpu", detail::gpu_summary_to_json(s)}};
  return j.dump(2) + "\n";
}

GpuSummary parse_gpu_summary_json(const std::string& text, const std::string& source_name) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw Error(fmt::format("{} is not valid JSON (truncated or corrupted?)", source_name));
  try {
    return detail::gpu_summary_from_json(j);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} is not a fathom GPU summary: {}", source_name, e.what()));
  } catch (const Error& e) {
    throw Error(
        fmt::format("{}: {}", source_name, std::string(e.what()).substr(8)));  // without "fathom: "
  }
}

}  // namespace fathom
