#include "analyze/summarize_gpu.h"

#include <algorithm>
#include <string>

#include "aggregate/gpu_aggregator.h"
#include "analyze/tensor_core_analysis.h"
#include "analyze/timeline_analysis.h"
#include "analyze/transfer_analysis.h"

namespace fathom {

GpuSummary summarize_gpu(const GpuAggregate& a, const GpuSummaryOptions& options) {
  GpuSummary s;
  s.source = options.source;
  s.devices = a.devices;
  s.gpu_activity = a.has_gpu_activity();
  s.records = a.records;
  s.dropped_records = a.dropped_records;
  if (!s.gpu_activity) {
    s.not_measured.push_back(
        {"GPU activity",
         "the records hold no kernel, copy or memset (a CPU-only run, or GPU tracing was off)"});
    return s;
  }
  s.tensor_cores = analyze_tensor_cores(a);
  s.transfers = analyze_transfers(a, options.link);
  s.timeline = analyze_timeline(a);
  for (const StepGpuStats& st : a.step_rows) {
    StepGpu g;
    g.name = st.name;
    g.wall_ns = std::max<std::int64_t>(0, st.end_ns - st.start_ns);
    g.kernel_count = st.work.kernel_count;
    g.kernel_ns = st.work.kernel_ns - st.work.communication_ns;
    g.tensor_core_ns = st.work.tensor_core_ns;
    if (g.kernel_ns > 0) g.tensor_core_share = double(g.tensor_core_ns) / double(g.kernel_ns);
    g.communication_ns = st.work.communication_ns;
    g.memcpy_count = st.work.memcpy_count;
    g.memcpy_bytes = st.work.memcpy_bytes;
    g.memcpy_ns = st.work.memcpy_ns;
    g.busy_ns = st.busy_ns;
    g.idle_ns = std::max<std::int64_t>(0, g.wall_ns - g.busy_ns);
    if (g.wall_ns > 0) g.busy_share = double(g.busy_ns) / double(g.wall_ns);
    s.steps.push_back(std::move(g));
  }
  s.steps_not_listed = a.folded_steps;

  if (s.transfers.count > 0 && !options.link.gb_per_s) {
    s.not_measured.push_back({"transfer bandwidth against the link peak",
                              options.link.description.empty()
                                  ? "the PCIe generation and width are not known"
                                  : options.link.description});
  }
  if (!s.tensor_cores.ops_recorded) {
    s.not_measured.push_back(
        {"Tensor-Core-eligible ops on CUDA cores",
         "no GEMM or convolution ATen ops in the records (ops or their shapes were not recorded)"});
  }
  if (const std::string note = undecided_kernels_note(s.tensor_cores); !note.empty())
    s.not_measured.push_back({"Tensor Core use of some kernels", note});
  if (!s.timeline.launches_recorded) {
    s.not_measured.push_back({"idle time from late launches",
                              "no kernel launch calls in the records: idle time the launches "
                              "explain is left in 'other'"});
  }
  if (!s.timeline.window_from_steps) {
    s.not_measured.push_back(
        {"busy share of step time",
         "no step annotations: busy and idle are against the whole recorded span"});
  }
  if (a.forgotten_launches > 0) {
    s.not_measured.push_back(
        {"op and phase of some late GPU work",
         std::to_string(a.forgotten_launches) +
             " launches waited longer for their GPU records than fathom's memory bound allows: "
             "their work is attributed by its own time only"});
  }
  if (a.late_records > 0) {
    s.not_measured.push_back(
        {"timeline of late records", std::to_string(a.late_records) +
                                         " records arrived after their time was swept: counted in "
                                         "totals, not in the timeline"});
  }
  return s;
}

}  // namespace fathom
