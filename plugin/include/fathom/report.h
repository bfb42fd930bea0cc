#pragma once
// The report model: what a run measured, what it did not measure and why, and the findings.
// Report writers (terminal, JSON, HTML) read only this. Schema: docs/report-schema.md.
#include <fathom/achievement.h>
#include <fathom/gpu_summary.h>
#include <fathom/hardware_fit.h>
#include <fathom/mixed_precision.h>
#include <fathom/module_report.h>
#include <fathom/options.h>
#include <fathom/phase.h>
#include <fathom/records.h>
#include <fathom/step_series.h>
#include <fathom/telemetry.h>
#include <fathom/unmeasured.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

inline constexpr int kReportSchemaVersion = 1;

// What wrote a report: a training session, or `fathom analyze` reading an Nsight Systems export.
enum class ReportOrigin { Session, NsightExport };
std::string_view report_origin_name(ReportOrigin o) noexcept;
std::optional<ReportOrigin> report_origin_from_name(std::string_view name) noexcept;

struct Environment {
  std::string fathom_version;
  std::string torch_version;
  std::string device;       // "cpu", "cuda:0"
  std::string device_name;  // "NVIDIA H200", or the CPU model
  std::optional<std::int64_t> device_memory_bytes;
  std::string hostname;
  std::int64_t pid = 0;
  std::string started_at;  // ISO 8601, UTC
  // Where the report came from; a session's report says how it ran (mode), an export's has none.
  ReportOrigin origin = ReportOrigin::Session;
  std::optional<Mode> mode;
  std::string nvtx;
  // The training loop's language: the fixes are written in it.
  LoopLanguage language = LoopLanguage::Cpp;
  std::vector<Unmeasured> not_measured;
  // A run on the CPU: the hardware fit's GPU card sizes mean nothing for it.
  bool cpu_run() const noexcept { return device == "cpu"; }
  // The mode's name, or the origin's for a report no session wrote ("nsight export").
  std::string_view mode_text() const noexcept;
};

struct PhaseSummary {
  Phase phase = Phase::Forward;
  std::int64_t count = 0;
  std::int64_t aborted = 0;
  bool inferred = false;  // data phase measured as the gap between steps
  double wall_ms_total = 0;
  double wall_ms_max = 0;
  std::optional<double> device_ms_total;
  std::optional<DeviceMemoryPeak> device_memory;  // the highest peak over the epoch
  std::optional<std::int64_t> rss_bytes_max;
  double wall_ms_mean() const noexcept { return count ? wall_ms_total / count : 0.0; }
};

struct CopySummary {
  CopyDirection direction = CopyDirection::HostToDevice;
  bool pinned = false;
  bool non_blocking = false;
  std::int64_t count = 0;
  std::int64_t bytes = 0;
  double wall_ms_total = 0;
};

enum class Severity { Info, Warning, Critical };
std::string_view severity_name(Severity s) noexcept;

struct Evidence {
  std::string name;   // "data share of step time"
  std::string value;  // "23.4 %"
};

struct Finding {
  std::string id;  // stable, e.g. "data.loader_bound"
  Severity severity = Severity::Info;
  std::string title;
  std::vector<Evidence> evidence;
  std::string why;
  std::string estimated_gain;           // "up to 23% of step time"
  std::optional<double> gain_fraction;  // of step time, when it can be estimated
  std::string fix;                      // a code snippet
  bool applied = false;
};

struct EpochSummary {
  std::int64_t index = 0;
  std::int64_t steps = 0;
  std::int64_t failed_steps = 0;
  std::int64_t samples = 0;
  double wall_ms = 0;        // epoch scope, begin to end
  double step_ms_total = 0;  // sum of step scopes
  double step_ms_max = 0;
  std::array<PhaseSummary, kPhaseCount> phases{};
  std::vector<CopySummary> copies;
  std::optional<DeviceMemoryPeak> device_memory;  // over the whole epoch
  std::optional<std::int64_t> peak_rss_bytes;     // process peak resident memory in the epoch
  bool ended_by_exception = false;
  std::optional<DeviceTelemetry> telemetry;  // NVML samples over the epoch (telemetry.h)
  std::optional<MemoryFootprint> footprint;  // parameters, gradients, optimizer state, activations
  std::optional<ModuleReport> modules;       // per-module activations, checkpoint plan, OOMs
  std::optional<MixedPrecisionSummary> mixed_precision;  // autocast, GradScaler, Auto policy
  std::optional<GpuSummary> gpu;        // CUPTI's GPU activity over the epoch (gpu_summary.h)
  std::optional<FlopsSummary> flops;    // FLOPs counted in profiled steps, throughput, MFU
  std::optional<EnergySummary> energy;  // joules per epoch, step and sample (achievement.h)
  std::optional<StepSeries> series;     // the steps one by one, change point, memory creep
  std::vector<Finding> findings;

  double step_ms_mean() const noexcept { return steps ? step_ms_total / steps : 0.0; }
  // Over the same time as the step time and the phase shares (cycle_ms_total: the steps and the
  // gaps between them), not the epoch's wall time: an eval pass after the last step, or set-up
  // before the first, is no training step's time (issue 24: samples/s and step time disagreed).
  double samples_per_second() const noexcept {
    const double ms = cycle_ms_total() > 0 ? cycle_ms_total() : wall_ms;
    return ms > 0 ? samples / (ms / 1000.0) : 0.0;
  }
  const PhaseSummary& phase(Phase p) const noexcept { return phases[static_cast<std::size_t>(p)]; }
  // The time every phase share is a share of (phase_shares.cpp): the steps, plus the gaps between
  // them when the data phase is that inferred gap. Explicit data scopes run inside a step and
  // count in it once. The phase shares and outside_phases_share() add up to 1.
  double cycle_ms_total() const noexcept;
  double phase_share(Phase p) const noexcept;
  // Step time inside no phase scope, as a share of cycle_ms_total().
  double outside_phases_share() const noexcept;
};

struct RunReport {
  int schema_version = kReportSchemaVersion;
  std::string run_name;
  Environment environment;
  std::vector<EpochSummary> epochs;
};

}  // namespace fathom
