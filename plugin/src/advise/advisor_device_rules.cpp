// Rules on the device's own telemetry (NVML): the PCIe link and the clocks.
#include <fathom/device_telemetry.h>

#include <iterator>

#include "advise/advisor_rules.h"
#include "base/thresholds.h"

namespace fathom::advice {

void link_degraded(const EpochSummary& e, std::vector<Finding>& out) {
  if (!e.telemetry) return;
  const PcieLinkState& l = e.telemetry->pcie;
  if (!l.gen || !l.width || !l.max_gen || !l.max_width) return;
  // Idle GPUs lower their link generation to save power: a low generation counts only when it
  // was seen under load. A narrow link is never a power state.
  const bool slow_gen = l.under_load && *l.gen < *l.max_gen;
  const bool narrow = *l.width < *l.max_width;
  if (!slow_gen && !narrow) return;
  Finding f = make_finding(finding_id::kLinkDegraded, Severity::Warning,
                           "The PCIe link runs below what the GPU supports");
  f.evidence = {{"link in use", fmt::format("gen {} x{}", *l.gen, *l.width)},
                {"link supported", fmt::format("gen {} x{}", *l.max_gen, *l.max_width)},
                {"seen", l.under_load ? "while kernels ran" : "while idle"}};
  const auto now = pcie_peak_bytes_per_s(*l.gen, *l.width);
  const auto best = pcie_peak_bytes_per_s(*l.max_gen, *l.max_width);
  if (now && best) {
    f.evidence.push_back(
        {"peak bandwidth", fmt::format("{} of {} per direction", gbps(*now), gbps(*best))});
    f.estimated_gain = fmt::format("host-device copies up to {:.1f}x faster", *best / *now);
  } else {
    f.estimated_gain = "faster host-device copies";
  }
  if (e.telemetry->nvlinks_active)
    f.evidence.push_back({"NVLink links up", fmt::format("{}", *e.telemetry->nvlinks_active)});
  f.why =
      "A link at a lower generation or fewer lanes caps every host-device copy. Common causes: "
      "the card sits in a slot wired for fewer lanes or behind the chipset, a riser, or a BIOS "
      "PCIe setting.";
  f.fix =
      "# check the link under load and the slot it is in\n"
      "nvidia-smi -q -d PCI | grep -A3 -E 'Link (Gen|Width)'\n"
      "sudo lspci -vv -s $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader) | grep LnkSta\n"
      "# move the card to a CPU-attached x16 slot; for GPU-to-GPU traffic prefer NVLink:\n"
      "nvidia-smi nvlink -s";
  out.push_back(std::move(f));
}

void clocks_throttled(const EpochSummary& e, std::vector<Finding>& out) {
  if (!e.telemetry) return;
  const DeviceTelemetry& t = *e.telemetry;
  double worst = 0;
  std::string reasons;
  for (const ThrottleReason& r : kThrottleReasons) {
    if (!r.slows_work) continue;
    const double s = throttle_share(t, r.name);
    if (s <= 0) continue;
    worst = std::max(worst, s);
    reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", r.name, percent(s));
  }
  if (worst <= thresholds::kThrottleShareOfSamples) return;
  Finding f = make_finding(finding_id::kClocksThrottled, Severity::Warning,
                           "The GPU lowered its clocks for power or temperature");
  f.evidence = {{"reasons (share of samples)", reasons}};
  if (t.sm_clock_mhz_mean && t.sm_clock_mhz_max)
    f.evidence.push_back({"SM clock", fmt::format("{:.0f} MHz mean of {:.0f} MHz max",
                                                  *t.sm_clock_mhz_mean, *t.sm_clock_mhz_max)});
  if (t.power_w_mean && t.power_limit_w)
    f.evidence.push_back(
        {"power", fmt::format("{:.0f} W mean, limit {:.0f} W", *t.power_w_mean, *t.power_limit_w)});
  f.why = "Lower clocks make every kernel slower; the cause is outside the training code.";
  if (t.sm_clock_mhz_mean && t.sm_clock_mhz_max && *t.sm_clock_mhz_max > 0) {
    const double lost = 1.0 - *t.sm_clock_mhz_mean / *t.sm_clock_mhz_max;
    f.estimated_gain = fmt::format("up to {} of compute-bound kernel time", percent(lost));
  } else {
    f.estimated_gain = "compute-bound kernels run at full clock";
  }
  f.fix =
      "# see why and how often the clocks dropped, and the power limit in force\n"
      "nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE\n"
      "# check airflow and cooling; raise the power limit where the card allows it:\n"
      "sudo nvidia-smi -pl <watts>";
  out.push_back(std::move(f));
}

}  // namespace fathom::advice
