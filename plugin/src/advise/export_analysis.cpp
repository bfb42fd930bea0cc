#include "advise/export_analysis.h"

#include <fathom/version.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>

#include "advise/advisor.h"
#include "analyze/cross_device_union.h"
#include "analyze/gpu_pipeline.h"
#include "analyze/summarize_gpu.h"

namespace fathom {
namespace {

// The host side of the report epoch: the export's step ranges and fathom's phase ranges.
struct HostTally {
  std::int64_t steps = 0;
  std::int64_t step_ns = 0, step_max_ns = 0;
  std::array<std::int64_t, kPhaseCount> count{}, total_ns{}, max_ns{};

  void add(const GpuActivity& b) {
    for (const AnnotationRecord& a : b.annotations) {
      const std::int64_t d = std::max<std::int64_t>(0, a.end_ns - a.start_ns);
      if (a.role == AnnotationRole::Step) {
        ++steps;
        step_ns += d;
        step_max_ns = std::max(step_max_ns, d);
      } else if (a.role == AnnotationRole::Phase && phase_from_name(a.name) == a.phase) {
        // Only ranges named as fathom names its phases: op ranges that imply a phase (autograd
        // nodes) nest and repeat, and would count the same time many times.
        const auto i = static_cast<std::size_t>(a.phase);
        ++count[i];
        total_ns[i] += d;
        max_ns[i] = std::max(max_ns[i], d);
      }
    }
  }
};

constexpr std::size_t kStepRows = std::size_t{1} << 16;
// Each device's pass reads the whole export again: the passes multiply the read. A node has up
// to 8 or 16 GPUs, a rack 72; past this the devices count in the whole export's figures only.
constexpr std::size_t kMaxDevicePasses = 128;

constexpr std::string_view kKernelsNotMeasured = "GPU kernels";

Unmeasured kernels_not_measured() {
  return {std::string(kKernelsNotMeasured),
          "the export has no CUPTI_ACTIVITY_KIND_KERNEL table (nsys ran without CUDA kernel "
          "tracing, or the table was dropped): kernel counts, busy time and Tensor Core shares "
          "are not known; record again with `nsys profile --trace=cuda`"};
}

// union_of: the whole export's pass also takes the unions across devices.
GpuSummary run_pass(const std::string& path, const GpuSummaryOptions& options,
                    const NsightReadBudget& budget, std::optional<std::int32_t> device,
                    bool step_rows, NsightBudgetSpent& spent, HostTally& tally,
                    NsightExportInfo& info, CrossDeviceUnion* union_of = nullptr,
                    std::pair<std::int64_t, std::int64_t>* window = nullptr) {
  AggregatorLimits limits;
  limits.step_rows = step_rows ? kStepRows : 0;
  GpuPipeline pipeline(limits);
  NsightReadOptions read;
  read.device = device;
  read.budget = budget;
  read.spent = spent;
  info = read_nsight_export(
      path,
      [&](GpuActivity&& b) {
        tally.add(b);
        if (union_of) union_of->add(b);
        pipeline.add(b);
      },
      read);
  spent = info.spent;
  const GpuAggregate a = pipeline.aggregate();
  if (window) *window = {a.window_begin_ns, a.window_end_ns};
  GpuSummary g = summarize_gpu(a, options);
  if (!info.kernel_table) g.not_measured.push_back(kernels_not_measured());
  return g;
}

EpochSummary epoch_of(const HostTally& t, const GpuSummary& gpu) {
  EpochSummary e;
  e.index = 0;
  e.steps = t.steps;
  e.step_ms_total = double(t.step_ns) / 1e6;
  e.step_ms_max = double(t.step_max_ns) / 1e6;
  e.wall_ms = double(gpu.timeline.window_ns) / 1e6;
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    PhaseSummary& p = e.phases[i];
    p.phase = kAllPhases[i];
    p.count = t.count[i];
    p.wall_ms_total = double(t.total_ns[i]) / 1e6;
    p.wall_ms_max = double(t.max_ns[i]) / 1e6;
  }
  e.gpu = gpu;
  return e;
}

Environment environment_of(const ExportAnalysis& a, const GpuSummary& gpu) {
  Environment env;
  env.fathom_version = kVersion;
  env.origin = ReportOrigin::NsightExport;
  env.nvtx = a.info.fathom_ranges > 0 ? "fathom ranges in the export" : "no fathom ranges";
  if (!gpu.devices.empty()) {
    env.device = fmt::format("cuda:{}", gpu.devices.front().id);
    env.device_name = gpu.devices.front().name;
    if (gpu.devices.front().total_memory_bytes > 0)
      env.device_memory_bytes = gpu.devices.front().total_memory_bytes;
  } else if (!a.info.devices.empty()) {
    env.device = fmt::format("cuda:{}", a.info.devices.front());
  }
  if (!a.info.device_table)
    env.not_measured.push_back(
        {"device name, memory and compute capability",
         "the export has no TARGET_INFO_GPU table (older Nsight Systems, or exported without it)"});
  if (a.info.fathom_ranges == 0)
    env.not_measured.push_back(
        {"fathom's phases and steps",
         "the export has no ranges of fathom's NVTX domain: GPU work is attributed to the phases "
         "PyTorch's own ranges imply (autograd nodes, Optimizer.*) where there are any"});
  env.not_measured.push_back(
      {"samples per second", "an Nsight Systems export does not count the samples of a step"});
  return env;
}

}  // namespace

ExportAnalysis analyze_nsight_export(const std::string& path, const GpuSummaryOptions& options,
                                     const NsightReadBudget& budget) {
  ExportAnalysis a;
  a.input = path;
  HostTally all_tally;
  // The first pass reads the whole export; a multi-GPU export then reads once per device (each
  // pass streams, so memory stays that of one pass).
  NsightExportInfo info;
  CrossDeviceUnion unions;
  std::pair<std::int64_t, std::int64_t> window;
  // One budget for every pass: a file naming thousands of devices is not read thousands of times.
  NsightBudgetSpent spent;
  const GpuSummary whole =
      run_pass(path, options, budget, std::nullopt, true, spent, all_tally, info, &unions, &window);
  a.info = info;
  const bool several = a.info.devices.size() > 1;
  GpuSummary gpu = whole;
  if (several) unions.apply(gpu, window.first, window.second);
  HostTally epoch_tally = all_tally;
  if (several) {
    // Steps of several ranks interleave in one timeline: the whole export keeps no step rows,
    // each device's pass has its own.
    gpu.steps.clear();
    gpu.steps_not_listed = 0;
    const std::size_t passes = std::min(a.info.devices.size(), kMaxDevicePasses);
    for (std::size_t i = 0; i < passes; ++i) {
      HostTally t;
      NsightExportInfo ignored;
      DeviceAnalysis d;
      d.device = a.info.devices[i];
      d.gpu = run_pass(path, options, budget, d.device, true, spent, t, ignored);
      if (i == 0) epoch_tally = t;  // the epoch's steps: the first device's processes
      a.devices.push_back(std::move(d));
    }
  }
  a.info.spent = spent;  // every pass's, not only the whole export's
  a.report.run_name = std::filesystem::path(path).stem().string();
  a.report.environment = environment_of(a, gpu);
  if (a.info.devices.size() > kMaxDevicePasses)
    a.report.environment.not_measured.push_back(
        {"each device's own figures past the first " + std::to_string(kMaxDevicePasses),
         fmt::format("the export names {} devices; fathom analyzes the first {} one by one (each "
                     "reads the export again) and counts all of them in the whole export's "
                     "figures; export one process or node at a time to see the others",
                     a.info.devices.size(), kMaxDevicePasses)});
  EpochSummary e = epoch_of(epoch_tally, gpu);
  e.findings = advise(e, a.report.environment, a.report.environment.not_measured);
  a.report.epochs.push_back(std::move(e));
  return a;
}

}  // namespace fathom
