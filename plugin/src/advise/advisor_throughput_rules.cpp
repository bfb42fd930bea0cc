// Rules on what the run achieved (achievement.h): a step whose FLOPs reach a small share of the
// device's peak, linked to what the timeline says kept it there.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "advise/advisor_rules.h"
#include "base/thresholds.h"

namespace fathom::advice {

void low_utilization(const EpochSummary& e, std::vector<Finding>& out) {
  if (!e.flops || !e.flops->mfu || *e.flops->mfu >= thresholds::kMfuLow) return;
  const FlopsSummary& f = *e.flops;
  Finding x = make_finding(
      finding_id::kLowUtilization,
      *f.mfu < thresholds::kMfuVeryLow ? Severity::Warning : Severity::Info,
      fmt::format("The step reaches {:.1f}% of the GPU's peak FLOP/s (MFU)", 100 * *f.mfu));
  x.evidence.push_back({"FLOPs per step (counted)", fmt::format("{:.3g}", f.per_step)});
  x.evidence.push_back(
      {"achieved", fmt::format("{:.3g} TFLOP/s", f.step_flops_per_s.value_or(0) / 1e12)});
  x.evidence.push_back({"peak", f.peak});
  // What the timeline says kept the GPU from its peak, largest first.
  std::string why;
  if (e.gpu && e.gpu->gpu_activity && e.gpu->timeline.window_ns > 0 &&
      !e.gpu->timeline.devices.empty()) {
    const DeviceTimeline& d = e.gpu->timeline.devices.front();
    const double w = static_cast<double>(e.gpu->timeline.window_ns);
    x.evidence.push_back({"GPU idle", percent(double(d.idle_ns) / w)});
    struct Cause {
      const char* name;
      std::int64_t ns;
    };
    Cause causes[] = {{"waiting for data", d.idle.data_wait_ns},
                      {"host synchronizations", d.idle.sync_ns},
                      {"late launches (launch-bound)", d.idle.host_launch_ns}};
    std::sort(std::begin(causes), std::end(causes),
              [](const Cause& a, const Cause& b) { return a.ns > b.ns; });
    for (const Cause& c : causes)
      if (c.ns > 0) x.evidence.push_back({std::string("idle: ") + c.name, percent(c.ns / w)});
    if (causes[0].ns > 0)
      why = fmt::format("the GPU idles {} of the step, most of it {}",
                        percent(double(d.idle_ns) / w), causes[0].name);
    if (const auto tc = e.gpu->tensor_cores.share; tc && *tc < thresholds::kTensorCoreShareLow) {
      x.evidence.push_back({"compute on Tensor Cores", percent(*tc)});
      why += std::string(why.empty() ? "" : "; ") + "GEMMs run on CUDA cores, not Tensor Cores";
    }
  } else {
    x.evidence.push_back({"why", "no GPU timeline in this report (CUPTI off or busy)"});
  }
  x.why =
      "Model FLOPs utilization is the step's useful floating-point work against the device's "
      "dense peak for the type that ran. " +
      (why.empty() ? std::string("The timeline does not show one cause.") : "Here: " + why + ".");
  x.estimated_gain = "the findings above that remove idle time or move GEMMs to Tensor Cores";
  x.fix =
      "// see the findings on data loading, synchronizations, launches and mixed precision;\n"
      "// a larger batch per step raises FLOPs per launch";
  out.push_back(std::move(x));
}

}  // namespace fathom::advice
