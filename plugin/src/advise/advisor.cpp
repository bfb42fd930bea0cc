#include "advise/advisor.h"

#include <fathom/gpu_summary.h>

#include <algorithm>

#include "advise/advisor_rules.h"

namespace fathom {
namespace advice {

std::optional<MemoryShare> device_memory_share(const EpochSummary& e, const Environment& env) {
  if (e.device_memory && env.device_memory_bytes && *env.device_memory_bytes > 0) {
    return MemoryShare{
        static_cast<double>(e.device_memory->peak_reserved_bytes) / *env.device_memory_bytes,
        e.device_memory->peak_reserved_bytes, *env.device_memory_bytes,
        "caching allocator peak reserved"};
  }
  if (e.telemetry && e.telemetry->memory_used_bytes_max && e.telemetry->memory_total_bytes &&
      *e.telemetry->memory_total_bytes > 0) {
    return MemoryShare{
        static_cast<double>(*e.telemetry->memory_used_bytes_max) / *e.telemetry->memory_total_bytes,
        *e.telemetry->memory_used_bytes_max, *e.telemetry->memory_total_bytes,
        "NVML peak memory used"};
  }
  return std::nullopt;
}

std::optional<BusyShare> gpu_busy_share(const EpochSummary& e) {
  // The timeline (kernel intervals over the steps) is the finer measure; NVML's utilization
  // counts a sample period busy when any kernel ran in it.
  if (e.gpu) {
    if (auto busy = timeline_busy_share(*e.gpu)) return busy;
  }
  if (e.telemetry && e.telemetry->gpu_utilization_pct_mean && e.telemetry->samples > 0)
    return BusyShare{*e.telemetry->gpu_utilization_pct_mean / 100.0,
                     "NVML utilization, mean of samples"};
  return std::nullopt;
}

}  // namespace advice

namespace {

int rank(Severity s) { return s == Severity::Critical ? 0 : s == Severity::Warning ? 1 : 2; }

}  // namespace

void order_findings(std::vector<Finding>& findings) {
  for (Finding& f : findings)
    if (f.applied) f.severity = Severity::Info;
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    if (a.applied != b.applied) return !a.applied;
    if (rank(a.severity) != rank(b.severity)) return rank(a.severity) < rank(b.severity);
    return a.gain_fraction.value_or(0) > b.gain_fraction.value_or(0);
  });
}

std::vector<Finding> advise(const EpochSummary& epoch, const Environment& env,
                            std::vector<Unmeasured>& not_measured) {
  std::vector<Finding> out;
  advice::data_wait(epoch, out);
  advice::host_copies(epoch, out);
  if (epoch.gpu) advice::gpu_rules(epoch, *epoch.gpu, out);
  advice::mixed_precision_actions(epoch, env, out, not_measured);
  advice::memory_near_capacity(epoch, env, out);
  advice::hardware_fit_rule(epoch, env, out);
  advice::batch_headroom(epoch, env, out);
  advice::link_degraded(epoch, out);
  advice::clocks_throttled(epoch, out);
  advice::unaccounted(epoch, out);
  advice::step_slowdown(epoch, out);
  advice::memory_creep(epoch, out);
  advice::low_utilization(epoch, out);
  advice::checkpoint_plans(epoch, out);
  advice::activation_plans(epoch, out);
  if (env.language == LoopLanguage::Python) advice::write_fixes_in_python(out);
  order_findings(out);
  return out;
}

std::vector<Finding> advise(const EpochSummary& epoch, const Environment& env) {
  std::vector<Unmeasured> not_measured = env.not_measured;
  return advise(epoch, env, not_measured);
}

}  // namespace fathom
