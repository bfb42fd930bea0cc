#pragma once
// The advisor's rules, grouped by what they read. Each appends at most a few findings to out and
// reads its thresholds from thresholds.h. Internal to advisor*.cpp.
#include <fathom/report.h>
#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "advise/advisor.h"
#include "base/bytes_text.h"

namespace fathom {
struct GpuSummary;
}

namespace fathom::advice {

inline std::string percent(double fraction) { return fmt::format("{:.1f} %", 100.0 * fraction); }
// Byte counts in evidence: the one formatter every writer uses (base/bytes_text.h).
using detail::bytes_text;
inline std::string gbps(double bytes_per_s) {
  return fmt::format("{:.2f} GB/s", bytes_per_s / 1e9);
}

inline Finding make_finding(std::string_view id, Severity severity, std::string title) {
  Finding f;
  f.id = std::string(id);
  f.severity = severity;
  f.title = std::move(title);
  return f;
}

// The share of device memory the epoch's peak used, and where the figure came from: the caching
// allocator's peak reserved bytes, else NVML's peak "used" (which includes the CUDA context).
struct MemoryShare {
  double share = 0;
  std::int64_t used = 0;
  std::int64_t total = 0;
  const char* source = "";
};
std::optional<MemoryShare> device_memory_share(const EpochSummary& e, const Environment& env);

// The share of the epoch the GPU was busy and how that was measured; empty when not measured.
struct BusyShare {
  double share = 0;
  const char* source = "";
};
std::optional<BusyShare> gpu_busy_share(const EpochSummary& e);

// Host-side rules: data loading, copies through fathom's helper, unscoped step time.
void data_wait(const EpochSummary& e, std::vector<Finding>& out);
void host_copies(const EpochSummary& e, std::vector<Finding>& out);
void unaccounted(const EpochSummary& e, std::vector<Finding>& out);

// Memory rules: near capacity, hardware fit, a larger batch when memory and GPU idle.
void memory_near_capacity(const EpochSummary& e, const Environment& env, std::vector<Finding>& out);
void hardware_fit_rule(const EpochSummary& e, const Environment& env, std::vector<Finding>& out);
void batch_headroom(const EpochSummary& e, const Environment& env, std::vector<Finding>& out);

// What the extensions did, read from their typed sections: a checkpoint finding per plan in
// e.modules (suggested, or applied by Auto).
void checkpoint_plans(const EpochSummary& e, std::vector<Finding>& out);
// An activation-plan finding per joint plan in e.modules (advisor_activation_plan.cpp), whose fix
// is activation_plan_fix: the plan with its predicted memory and time, per module, and its code.
void activation_plans(const EpochSummary& e, std::vector<Finding>& out);
std::string activation_plan_fix(const ActivationPlanReport& p);

// Mixed precision from e.mixed_precision (amp_advice.cpp): rolled back by Auto; applied (the GPU
// rules' "precision.mixed" marked applied, or a finding that it runs); or, in Suggest mode with
// fp32 throughout, the suggestion. Runs after gpu_rules, whose finding it completes.
void mixed_precision_actions(const EpochSummary& e, const Environment& env,
                             std::vector<Finding>& out, std::vector<Unmeasured>& not_measured);

// Device telemetry rules (NVML): PCIe link below its capability, clocks lowered.
void link_degraded(const EpochSummary& e, std::vector<Finding>& out);
void clocks_throttled(const EpochSummary& e, std::vector<Finding>& out);

// GPU activity rules (CUPTI / trace): mixed precision, transfers, host syncs, launch-bound
// steps, communication. Findings the host-side rules already made get the GPU's evidence added.
void gpu_rules(const EpochSummary& e, const GpuSummary& g, std::vector<Finding>& out);
std::optional<BusyShare> timeline_busy_share(const GpuSummary& g);

// Step series rules (advisor_step_rules.cpp): a change point in step time, memory creep.
void step_slowdown(const EpochSummary& e, std::vector<Finding>& out);
void memory_creep(const EpochSummary& e, std::vector<Finding>& out);

// Throughput rules (advisor_throughput_rules.cpp): a low MFU linked to the timeline's causes.
void low_utilization(const EpochSummary& e, std::vector<Finding>& out);

// The fixes of a Python loop's findings in Python (python_fixes.cpp): the rules write C++.
void write_fixes_in_python(std::vector<Finding>& findings);

}  // namespace fathom::advice
