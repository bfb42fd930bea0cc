// The GPU section of the report as JSON (docs/report-schema.md, "gpu"). Times are integer
// nanoseconds, shares are fractions (0..1); a value that was not measured is null, never 0.
#include "report/gpu_summary_json.h"

#include <fathom/error.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <array>

#include "analyze/transfer_analysis.h"

namespace fathom::detail {

// --- Tensor Cores
// ---------------------------------------------------------------------------------

template <typename V>
static void fields(V& v, DecidedTime& t) {
  v("count", t.count);
  v("ns", t.ns);
}

template <typename V>
static void fields(V& v, TensorCoreDecisions& d) {
  v.since("tensor_cores_by_name", d.tensor_cores_by_name);
  v.since("cuda_cores_by_name", d.cuda_cores_by_name);
  v.since("tensor_cores_by_op", d.tensor_cores_by_op);
  v.since("unknown", d.unknown);
  v.since("unknown_without_capability", d.unknown_without_capability);
}

template <typename V>
static void fields(V& v, PhaseTensorCores& p) {
  v("phase", p.phase);
  v("kernel_ns", p.kernel_ns);
  v("tensor_core_ns", p.tensor_core_ns);
  v("share", p.share);
  v.since("unknown_ns", p.unknown_ns);
}

template <typename V>
static void fields(V& v, KernelFamilyTime& f) {
  v("family", f.family);
  v("tensor_core", f.tensor_core);
  v.since("decision", f.decision);
  v("count", f.count);
  v("total_ns", f.total_ns);
  v.since("tensor_core_by_op_ns", f.tensor_core_by_op_ns);
}

template <typename V>
static void fields(V& v, TopKernel& k) {
  v("name", k.name);
  v("family", k.family);
  v("tensor_core", k.tensor_core);
  v("communication", k.communication);
  v("precision", k.precision);
  v.since("decision", k.decision);
  v("count", k.count);
  v("total_ns", k.total_ns);
  v.since("tensor_core_by_op_ns", k.tensor_core_by_op_ns);
}

template <typename V>
static void fields(V& v, EligibleOp& o) {
  v("op", o.op);
  v("shapes", o.shapes);
  v("dtypes", o.dtypes);
  v("misaligned", o.misaligned);
  v("instances", o.instances);
  v("only_cuda_cores", o.only_cuda_cores);
  v("tensor_core_ns", o.tensor_core_ns);
  v("cuda_core_ns", o.cuda_core_ns);
}

template <typename V>
static void fields(V& v, TensorCoreResult& r) {
  v("kernel_count", r.kernel_count);
  v("kernel_ns", r.kernel_ns);
  v("tensor_core_count", r.tensor_core_count);
  v("tensor_core_ns", r.tensor_core_ns);
  v("share", r.share);
  const bool decided = v.since("decisions", r.decisions);
  if constexpr (!V::writing) {
    if (!decided) {  // written before fathom told unknown kernels apart: it counted them as CUDA
      r.decisions.tensor_cores_by_name = {r.tensor_core_count, r.tensor_core_ns};
      r.decisions.cuda_cores_by_name = {r.kernel_count - r.tensor_core_count,
                                        r.kernel_ns - r.tensor_core_ns};
    }
  }
  v.since("unknown_share", r.unknown_share);
  v.since("op_dtypes_recorded", r.op_dtypes_recorded);
  v("phases", r.phases);
  v("families", r.families);
  v("top_kernels", r.top_kernels);
  v("ops_recorded", r.ops_recorded);
  v("eligible_instances", r.eligible_instances);
  v("eligible_with_kernels", r.eligible_with_kernels);
  v("eligible_only_cuda_cores", r.eligible_only_cuda_cores);
  v("eligible_cuda_core_ns", r.eligible_cuda_core_ns);
  v.since("eligible_unknown_ns", r.eligible_unknown_ns);
  v("on_cuda_cores", r.on_cuda_cores);
  v("misaligned", r.misaligned);
}

// --- transfers
// ------------------------------------------------------------------------------------

template <typename V>
static void fields(V& v, LinkPeak& l) {
  v("gb_per_s", l.gb_per_s);
  v("description", l.description);
}

template <typename V>
static void fields(V& v, TransferDirection& d) {
  v("direction", d.direction);
  v("count", d.count);
  v("bytes", d.bytes);
  v("total_ns", d.total_ns);
  v("pageable_count", d.pageable_count);
  v("pageable_bytes", d.pageable_bytes);
  v("pinned_count", d.pinned_count);
  v("pinned_bytes", d.pinned_bytes);
  v("sync_count", d.sync_count);
  v("sync_bytes", d.sync_bytes);
  v("async_count", d.async_count);
  v("async_bytes", d.async_bytes);
  v.since("unknown_call_count", d.unknown_call_count);
  v.since("unknown_call_bytes", d.unknown_call_bytes);
  v("gb_per_s", d.gb_per_s);
  v("share_of_peak", d.share_of_peak);
}

template <typename V>
static void fields(V& v, TransferRow& w) {
  v("direction", w.direction);
  v("host_memory", w.host_memory);
  v("async", w.async);
  v.since("async_known", w.async_known);
  v("count", w.count);
  v("bytes", w.bytes);
  v("total_ns", w.total_ns);
  v("gb_per_s", w.gb_per_s);
  v("share_of_peak", w.share_of_peak);
}

template <typename V>
static void fields(V& v, PhaseTransfers& p) {
  v("phase", p.phase);
  v("count", p.count);
  v("bytes", p.bytes);
  v("total_ns", p.total_ns);
}

template <typename V>
static void fields(V& v, TransferResult& r) {
  v("link", r.link);
  v("count", r.count);
  v("bytes", r.bytes);
  v("total_ns", r.total_ns);
  v("busy_ns", r.busy_ns);
  v("overlap_with_kernels_ns", r.overlap_with_kernels_ns);
  v("overlap_share", r.overlap_share);
  v("window_ns", r.window_ns);
  v("share_of_window", r.share_of_window);
  v("pageable_async_count", r.pageable_async_count);
  v("large_sync_h2d_count", r.large_sync_h2d_count);
  v("directions", r.directions);
  v("rows", r.rows);
  v.since("phases", r.phases);  // schema 1 reports before the per-phase rows lack it
}

// --- the timeline and the steps
// ---------------------------------------------------------------------

template <typename V>
static void fields(V& v, IdleStats& i) {
  v("data_wait_ns", i.data_wait_ns);
  v("sync_ns", i.sync_ns);
  v("host_launch_ns", i.host_launch_ns);
  v("other_ns", i.other_ns);
  v("gaps", i.gaps);
}

template <typename V>
static void fields(V& v, DeviceTimeline& d) {
  v("device", d.device);
  v("busy_ns", d.busy_ns);
  v("idle_ns", d.idle_ns);
  v("busy_share", d.busy_share);
  v("idle", d.idle);
  v("kernel_ns", d.kernel_ns);
  v("communication_ns", d.communication_ns);
  v("communication_overlap_ns", d.communication_overlap_ns);
  v("communication_overlap_share", d.communication_overlap_share);
}

template <typename V>
static void fields(V& v, TimelineResult& r) {
  v("window_ns", r.window_ns);
  v("window_from_steps", r.window_from_steps);
  v("steps", r.steps);
  v("kernel_count", r.kernel_count);
  v("tiny_kernel_count", r.tiny_kernel_count);
  v("tiny_kernel_ns", r.tiny_kernel_ns);
  v("tiny_count_share", r.tiny_count_share);
  v("tiny_time_share", r.tiny_time_share);
  v("communication_kernels", r.communication_kernels);
  v("communication_ns", r.communication_ns);
  v("communication_share", r.communication_share);
  v("launch_calls", r.launch_calls);
  v("sync_calls", r.sync_calls);
  v("sync_call_ns", r.sync_call_ns);
  v("sync_records", r.sync_records);
  v("sync_record_ns", r.sync_record_ns);
  v("launches_recorded", r.launches_recorded);
  v("late_records", r.late_records);
  v("devices", r.devices);
}

template <typename V>
static void fields(V& v, StepGpu& g) {
  v("name", g.name);
  v("wall_ns", g.wall_ns);
  v("kernel_count", g.kernel_count);
  v("kernel_ns", g.kernel_ns);
  v("tensor_core_ns", g.tensor_core_ns);
  v("tensor_core_share", g.tensor_core_share);
  v("communication_ns", g.communication_ns);
  v("memcpy_count", g.memcpy_count);
  v("memcpy_bytes", g.memcpy_bytes);
  v("memcpy_ns", g.memcpy_ns);
  v("busy_ns", g.busy_ns);
  v("idle_ns", g.idle_ns);
  v("busy_share", g.busy_share);
}

// Without GPU activity the analyses are null, not a row of zeros that reads like a measurement.
template <typename V>
static void describe(V& v, GpuSummary& s) {
  v("source", s.source);
  v("gpu_activity", s.gpu_activity);
  v("devices", s.devices);
  v("records", s.records);
  v("dropped_records", s.dropped_records);
  v.null_unless(s.gpu_activity, "tensor_cores", s.tensor_cores);
  v.null_unless(s.gpu_activity, "transfers", s.transfers);
  v.null_unless(s.gpu_activity, "timeline", s.timeline);
  if (v.since("steps", s.steps)) v.since("steps_not_listed", s.steps_not_listed);
  v("not_measured", s.not_measured);
}

void fields(JsonWriter& v, GpuSummary& s) { describe(v, s); }
void fields(JsonReader& v, GpuSummary& s) { describe(v, s); }

}  // namespace fathom::detail

namespace fathom {

std::string format_gpu_summary_json(const GpuSummary& s) {
  return detail::write_json(s).dump(2) + "\n";
}

std::string format_gpu_analysis_json(const GpuSummary& s, const std::string& input_path) {
  const nlohmann::json j = {{"schema", "fathom.analysis"},
                            {"schema_version", kAnalysisSchemaVersion},
                            {"input", input_path},
                            {"gpu", detail::write_json(s)}};
  return j.dump(2) + "\n";
}

GpuSummary parse_gpu_summary_json(const std::string& text, const std::string& source_name) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw Error(fmt::format("{} is not valid JSON (truncated or corrupted?)", source_name));
  try {
    return detail::read_json<GpuSummary>(j);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} is not a fathom GPU summary: {}", source_name, e.what()));
  } catch (const Error& e) {
    throw Error(
        fmt::format("{}: {}", source_name, std::string(e.what()).substr(8)));  // without "fathom: "
  }
}

}  // namespace fathom
