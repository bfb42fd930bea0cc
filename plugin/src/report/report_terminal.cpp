#include <fathom/hardware_fit.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <string_view>

#include "analyze/fit_hardware.h"
#include "base/bytes_text.h"
#include "base/terminal_text.h"
#include "report/mixed_precision_report.h"
#include "report/module_report_writers.h"
#include "report/no_findings_text.h"

namespace fathom {
namespace {

using detail::bytes_text;

constexpr const char* kDash = "-";

// Shares of the same time (EpochSummary::cycle_ms_total), so that with "other" they add up.
void phase_table(std::string& out, const EpochSummary& e) {
  const bool have_cycle = e.cycle_ms_total() > 0;
  fmt::format_to(std::back_inserter(out),
                 "  {:<10} {:>6} {:>10} {:>7} {:>10} {:>11} {:>11} {:>10}\n", "phase", "count",
                 "ms/step", "share", "device ms", "peak alloc", "peak resv", "rss max");
  bool any_inferred = false;
  for (const PhaseSummary& p : e.phases) {
    if (p.count == 0) continue;
    any_inferred = any_inferred || p.inferred;
    const double per_step = e.steps ? p.wall_ms_total / e.steps : 0.0;
    const std::string share =
        have_cycle ? fmt::format("{:.1f}%", 100.0 * e.phase_share(p.phase)) : kDash;
    const std::string device =
        p.device_ms_total
            ? fmt::format("{:.2f}", *p.device_ms_total / std::max<std::int64_t>(e.steps, 1))
            : kDash;
    const std::string alloc =
        p.device_memory ? bytes_text(p.device_memory->peak_allocated_bytes) : kDash;
    const std::string resv =
        p.device_memory ? bytes_text(p.device_memory->peak_reserved_bytes) : kDash;
    const std::string rss = p.rss_bytes_max ? bytes_text(*p.rss_bytes_max) : kDash;
    std::string name = std::string(phase_name(p.phase)) + (p.inferred ? "*" : "");
    if (p.aborted) name += fmt::format(" ({} aborted)", p.aborted);
    fmt::format_to(std::back_inserter(out),
                   "  {:<10} {:>6} {:>10.2f} {:>7} {:>10} {:>11} {:>11} {:>10}\n", name, p.count,
                   per_step, share, device, alloc, resv, rss);
  }
  if (have_cycle && e.steps > 0) {
    const double other = e.outside_phases_share();
    fmt::format_to(std::back_inserter(out), "  {:<10} {:>6} {:>10.2f} {:>7}\n", "other", kDash,
                   other * e.cycle_ms_total() / e.steps, fmt::format("{:.1f}%", 100.0 * other));
  }
  if (any_inferred)
    out += "  * data: the time between one step's end and the next step's start (the loader)\n";
}

void copy_table(std::string& out, const EpochSummary& e) {
  if (e.copies.empty()) return;
  fmt::format_to(std::back_inserter(out), "  {:<16} {:>6} {:>11} {:>8} {:>6} {:>9}\n", "direction",
                 "count", "bytes", "memory", "async", "host ms");
  for (const CopySummary& c : e.copies) {
    fmt::format_to(std::back_inserter(out), "  {:<16} {:>6} {:>11} {:>8} {:>6} {:>9.2f}\n",
                   copy_direction_name(c.direction), c.count, bytes_text(c.bytes),
                   c.pinned ? "pinned" : "pageable", c.non_blocking ? "yes" : "no",
                   c.wall_ms_total);
  }
}

void section(std::string& out, std::string_view title) {
  fmt::format_to(std::back_inserter(out), "\n{}\n", title);
}

// What CUPTI saw the GPU do (gpu_summary_terminal.cpp); nothing when it was not collecting.
void gpu_section(std::string& out, const EpochSummary& e) {
  if (!e.gpu) return;
  section(out, "GPU activity");
  out += format_gpu_summary_text(*e.gpu);
}

// A fix fathom applied is labelled so, not with the severity of the problem it fixed.
std::string label(const Finding& f) {
  return fmt::format("[{}]", f.applied ? "applied" : severity_name(f.severity));
}

// The three findings that matter most, one line each, before any table.
void top_findings(std::string& out, const EpochSummary& e, const Environment& env) {
  section(out, "top findings");
  if (e.findings.empty()) {
    fmt::format_to(std::back_inserter(out), "  {}\n", detail::no_findings_text(env));
    return;
  }
  const std::size_t n = std::min<std::size_t>(3, e.findings.size());
  for (std::size_t k = 0; k < n; ++k) {
    const Finding& f = e.findings[k];
    fmt::format_to(std::back_inserter(out), "  {}. {:<10} {}{}\n", k + 1, label(f), f.title,
                   f.estimated_gain.empty() || f.applied ? "" : " -> " + f.estimated_gain);
  }
  if (e.findings.size() > n)
    fmt::format_to(std::back_inserter(out), "  ... {} more below\n", e.findings.size() - n);
}

std::string opt_text(const std::optional<double>& v, const char* format_spec_unit) {
  return v ? fmt::format(fmt::runtime(format_spec_unit), *v) : std::string(kDash);
}

// What NVML said over the epoch.
void telemetry_section(std::string& out, const EpochSummary& e) {
  if (!e.telemetry) return;
  const DeviceTelemetry& t = *e.telemetry;
  section(out, fmt::format("device telemetry ({}, {} samples over {:.1f} s{})", t.source, t.samples,
                           t.duration_s, t.device_name.empty() ? "" : ", " + t.device_name));
  auto row = [&](std::string_view name, const std::string& value) {
    fmt::format_to(std::back_inserter(out), "  {:<14} {}\n", name, value);
  };
  row("GPU busy", fmt::format("{} mean, {} max (NVML utilization)",
                              opt_text(t.gpu_utilization_pct_mean, "{:.1f} %"),
                              opt_text(t.gpu_utilization_pct_max, "{:.0f} %")));
  if (t.memory_used_bytes_max)
    row("memory used",
        fmt::format("{} peak of {}", bytes_text(*t.memory_used_bytes_max),
                    t.memory_total_bytes ? bytes_text(*t.memory_total_bytes) : kDash));
  row("power",
      fmt::format("{} mean, {} max, limit {}", opt_text(t.power_w_mean, "{:.0f} W"),
                  opt_text(t.power_w_max, "{:.0f} W"), opt_text(t.power_limit_w, "{:.0f} W")));
  row("energy", t.energy_j ? fmt::format("{:.1f} kJ", *t.energy_j / 1000.0) : std::string(kDash));
  row("SM clock", fmt::format("{} mean of {} max", opt_text(t.sm_clock_mhz_mean, "{:.0f} MHz"),
                              opt_text(t.sm_clock_mhz_max, "{:.0f} MHz")));
  std::string throttle;
  for (const ThrottleShare& r : t.throttle)
    throttle += fmt::format("{}{} {:.0f} %", throttle.empty() ? "" : ", ", r.reason, 100 * r.share);
  row("clock reasons", throttle.empty() ? "none" : throttle + " of samples");
  const PcieLinkState& l = t.pcie;
  auto link = [](const std::optional<int>& g, const std::optional<int>& w) {
    return fmt::format("gen {} x{}", g ? std::to_string(*g) : kDash,
                       w ? std::to_string(*w) : kDash);
  };
  row("PCIe link", fmt::format("{} {}(supports {})", link(l.gen, l.width),
                               l.under_load ? "under load " : "", link(l.max_gen, l.max_width)));
  auto rate = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.2f} GB/s", *v / 1e9) : std::string(kDash);
  };
  row("PCIe traffic", fmt::format("to device {} mean, {} max; from device {} mean",
                                  rate(t.pcie_rx_bytes_per_s_mean), rate(t.pcie_rx_bytes_per_s_max),
                                  rate(t.pcie_tx_bytes_per_s_mean)));
  if (t.nvlinks_active) row("NVLink", fmt::format("{} links up", *t.nvlinks_active));
  for (const Unmeasured& u : t.not_measured)
    fmt::format_to(std::back_inserter(out), "  not measured: {}: {}\n", u.what, u.why);
}

// The measured footprint and what it needs on other cards: the card columns only for a run on a
// GPU (they are GPU memory sizes), and a reason every configuration shares said once.
void hardware_fit_section(std::string& out, const EpochSummary& e, const Environment& env) {
  const std::optional<HardwareFit> fitted = epoch_hardware_fit(e, env);
  if (!fitted) return;
  const HardwareFit& fit = *fitted;
  const MemoryFootprint& m = *e.footprint;
  const std::optional<std::string> none_estimated = shared_not_estimated_reason(fit);
  section(out, "hardware fit");
  fmt::format_to(
      std::back_inserter(out),
      "  measured: parameters {} ({}), gradients {}, optimizer state {}, activations {}\n",
      bytes_text(m.parameter_bytes), m.parameter_count, bytes_text(m.gradient_bytes),
      bytes_text(m.optimizer_state_bytes, "not measured (no optimizer watched)"),
      bytes_text(m.activation_bytes,
                 none_estimated ? "not measured" : "not measured (" + m.activation_why + ")"));
  if (none_estimated) {
    fmt::format_to(std::back_inserter(out), "  configurations not estimated: {}\n",
                   *none_estimated);
    return;
  }
  const bool cards = fit.cards_compared;
  fmt::format_to(std::back_inserter(out), "  overhead {} ({}), allocator fragmentation x{:.2f}\n",
                 bytes_text(fit.overhead_bytes), fit.overhead_measured ? "measured" : "assumed",
                 fit.fragmentation);
  fmt::format_to(std::back_inserter(out), "  {:<34} {:>10}", "configuration", "needs");
  if (cards)
    for (const CardSize& c : kFitCards) fmt::format_to(std::back_inserter(out), " {:>7}", c.label);
  out += "\n";
  for (const FitVariant& v : fit.variants) {
    std::string name = v.mixed_precision ? "mixed precision" : "fp32";
    if (v.checkpointing) name += " + checkpointing";
    if (v.as_run) name += " (as run)";
    if (!v.need_bytes) {
      fmt::format_to(std::back_inserter(out), "  {:<34} not estimated: {}\n", name, v.why);
      continue;
    }
    fmt::format_to(std::back_inserter(out), "  {:<34} {:>10}", name, bytes_text(*v.need_bytes));
    if (cards)
      for (Fit f : v.cards)
        fmt::format_to(std::back_inserter(out), " {:>7}",
                       f == Fit::Fits    ? "yes"
                       : f == Fit::Tight ? "tight"
                                         : "no");
    out += "\n";
  }
}

void memory_section(std::string& out, const EpochSummary& e) {
  if (!e.device_memory && !e.peak_rss_bytes) return;
  section(out, "memory");
  if (e.device_memory) {
    fmt::format_to(std::back_inserter(out),
                   "  device: peak allocated {}, peak reserved {}, {} allocator retries, {} "
                   "out-of-memory errors\n",
                   bytes_text(e.device_memory->peak_allocated_bytes),
                   bytes_text(e.device_memory->peak_reserved_bytes), e.device_memory->alloc_retries,
                   e.device_memory->ooms);
  }
  if (e.peak_rss_bytes)
    fmt::format_to(std::back_inserter(out), "  process peak resident memory: {}\n",
                   bytes_text(*e.peak_rss_bytes));
}

// FLOPs counted in profiled steps, what they reached, and the energy the epoch cost.
void achievement_section(std::string& out, const EpochSummary& e) {
  if (!e.flops && !e.energy) return;
  section(out, "what the steps achieved");
  auto o = std::back_inserter(out);
  auto g = [](double flops) { return fmt::format("{:.3g} GFLOP", flops / 1e9); };
  if (e.flops && e.flops->profiled_steps > 0) {
    const FlopsSummary& f = *e.flops;
    fmt::format_to(o, "  {:<11} {} per step (forward {}, backward {}; {} profiled step{}, {})\n",
                   "FLOPs", g(f.per_step), g(f.forward), g(f.backward), f.profiled_steps,
                   f.profiled_steps == 1 ? "" : "s",
                   f.dominant_dtype.empty() ? "-" : f.dominant_dtype);
    std::string phases;
    for (const PhaseThroughput& p : f.achieved)
      if (p.flops_per_s)
        phases += fmt::format("; {} {:.3g} TFLOP/s ({} time)", p.phase, *p.flops_per_s / 1e12,
                              p.time_source);
    if (f.step_flops_per_s)
      fmt::format_to(o, "  {:<11} {:.3g} TFLOP/s over the step{}\n", "throughput",
                     *f.step_flops_per_s / 1e12, phases);
    if (f.mfu) fmt::format_to(o, "  {:<11} {:.2f}% of {}\n", "MFU", 100 * *f.mfu, f.peak);
  }
  if (e.flops)
    for (const Unmeasured& u : e.flops->not_measured)
      fmt::format_to(o, "  not measured: {}: {}\n", u.what, u.why);
  if (e.energy && e.energy->epoch_j) {
    const EnergySummary& en = *e.energy;
    auto j = [](const std::optional<double>& v) {
      return v ? fmt::format("{:.4g} J", *v) : std::string(kDash);
    };
    fmt::format_to(o, "  {:<11} {} per epoch, {} per step, {} per sample, {} mean ({})\n", "energy",
                   j(en.epoch_j), j(en.per_step_j), j(en.per_sample_j),
                   en.average_w ? fmt::format("{:.1f} W", *en.average_w) : std::string(kDash),
                   en.source);
  }
  if (e.energy)
    for (const Unmeasured& u : e.energy->not_measured)
      fmt::format_to(o, "  not measured: {}: {}\n", u.what, u.why);
}

void not_measured_section(std::string& out, const Environment& env) {
  if (env.not_measured.empty()) return;
  section(out, "not measured");
  for (const Unmeasured& u : env.not_measured)
    fmt::format_to(std::back_inserter(out), "  not measured: {}: {}\n", u.what, u.why);
}

void print_block(std::string& out, const std::string& text, std::string_view indent) {
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    fmt::format_to(std::back_inserter(out), "{}{}\n", indent, text.substr(start, nl - start));
    start = nl + 1;
  }
}

void findings(std::string& out, const EpochSummary& e) {
  if (e.findings.empty()) return;
  section(out, fmt::format("findings ({})", e.findings.size()));
  for (const Finding& f : e.findings) {
    fmt::format_to(std::back_inserter(out), "  {} {}  ({})\n", label(f), f.title, f.id);
    std::size_t width = 0;
    for (const Evidence& ev : f.evidence) width = std::max(width, ev.name.size());
    for (const Evidence& ev : f.evidence)
      fmt::format_to(std::back_inserter(out), "      {:<{}}  {}\n", ev.name, width, ev.value);
    if (!f.why.empty()) fmt::format_to(std::back_inserter(out), "      why: {}\n", f.why);
    if (!f.estimated_gain.empty())
      fmt::format_to(std::back_inserter(out), "      gain: {}\n", f.estimated_gain);
    if (!f.fix.empty()) {
      out += "      fix:\n";
      print_block(out, f.fix, "        ");
    }
  }
}

}  // namespace

std::string format_terminal_report(const RunReport& report, int epoch) {
  std::string out;
  if (report.epochs.empty()) return "fathom: no epoch has ended yet\n";
  const std::size_t i = epoch < 0 ? report.epochs.size() - 1 : static_cast<std::size_t>(epoch);
  if (i >= report.epochs.size()) return fmt::format("fathom: no epoch {} in this report\n", epoch);
  const EpochSummary& e = report.epochs[i];
  const Environment& env = report.environment;
  fmt::format_to(std::back_inserter(out), "fathom report | {} | epoch {} | {}{}\n", report.run_name,
                 e.index, env.device, env.device_name.empty() ? "" : " (" + env.device_name + ")");
  fmt::format_to(std::back_inserter(out),
                 "  steps {} ({} failed) | samples {} | wall {:.2f} s | {:.1f} samples/s | step "
                 "{:.2f} ms mean, {:.2f} ms max{}\n",
                 e.steps, e.failed_steps, e.samples, e.wall_ms / 1000.0, e.samples_per_second(),
                 e.step_ms_mean(), e.step_ms_max,
                 e.ended_by_exception ? " | ENDED BY EXCEPTION" : "");
  top_findings(out, e, env);
  section(out, "step time by phase");
  phase_table(out, e);
  if (!e.copies.empty()) section(out, "copies");
  copy_table(out, e);
  gpu_section(out, e);
  memory_section(out, e);
  hardware_fit_section(out, e, env);
  detail::mixed_precision_section(out, e);
  detail::module_report_section(out, e);
  telemetry_section(out, e);
  achievement_section(out, e);
  not_measured_section(out, env);
  findings(out, e);
  return detail::terminal_safe(out);
}

}  // namespace fathom
