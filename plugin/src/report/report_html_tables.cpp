// The HTML report's tables: phases, copies, top kernels, device telemetry, hardware fit.
#include <fathom/gpu_summary.h>
#include <fathom/hardware_fit.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "analyze/fit_hardware.h"
#include "analyze/tensor_core_analysis.h"
#include "analyze/transfer_analysis.h"
#include "base/bytes_text.h"
#include "report/html_charts.h"
#include "report/report_html_parts.h"

namespace fathom::html_report {

using detail::bytes_text;
using html::escape;

std::string phase_table(const EpochSummary& e) {
  std::string out;
  table_head(out, {"phase", "count", "ms per step", "share", "device ms per step", "peak allocated",
                   "peak reserved", "RSS max"});
  for (const PhaseSummary& p : e.phases) {
    if (p.count == 0) continue;
    const double per_step = e.steps ? p.wall_ms_total / e.steps : 0;
    row(out,
        {escape(std::string(phase_name(p.phase)) + (p.inferred ? " (gap between steps)" : "")),
         fmt::format("{}", p.count), fmt::format("{:.2f}", per_step),
         e.cycle_ms_total() > 0 ? pct(e.phase_share(p.phase)) : "-",
         p.device_ms_total && e.steps ? fmt::format("{:.2f}", *p.device_ms_total / e.steps) : "-",
         p.device_memory ? bytes_text(p.device_memory->peak_allocated_bytes) : "-",
         p.device_memory ? bytes_text(p.device_memory->peak_reserved_bytes) : "-",
         p.rss_bytes_max ? bytes_text(*p.rss_bytes_max) : "-"});
  }
  // The step time in no phase scope: with it the shares add up (EpochSummary::cycle_ms_total).
  if (e.cycle_ms_total() > 0 && e.steps > 0)
    row(out, {"other (outside phase scopes)", "-",
              fmt::format("{:.2f}", e.outside_phases_share() * e.cycle_ms_total() / e.steps),
              pct(e.outside_phases_share()), "-", "-", "-", "-"});
  return out + "</tbody></table>";
}

std::string copies_table(const EpochSummary& e) {
  if (e.copies.empty()) return {};
  std::string out = "<h3>Copies through fathom's helper</h3>";
  table_head(out, {"direction", "count", "bytes", "host memory", "non-blocking", "host ms"});
  for (const CopySummary& c : e.copies)
    row(out, {escape(std::string(copy_direction_name(c.direction))), fmt::format("{}", c.count),
              bytes_text(c.bytes), c.pinned ? "pinned" : "pageable", c.non_blocking ? "yes" : "no",
              fmt::format("{:.2f}", c.wall_ms_total)});
  return out + "</tbody></table>";
}

std::string top_kernels_table(const EpochSummary& e) {
  const GpuSummary* g = gpu_of(e);
  if (!g || g->tensor_cores.top_kernels.empty()) return {};
  std::string out = "<h3>Top kernels</h3>";
  table_head(out, {"kernel", "family", "precision", "Tensor Cores", "count", "total ms"});
  for (const TopKernel& k : g->tensor_cores.top_kernels) {
    // Unknown: the name said neither; part of its time may have been decided by the launching op.
    const std::string unit =
        k.communication           ? "no (communication)"
        : k.decision != "unknown" ? (k.tensor_core ? "yes" : "no")
        : k.tensor_core_by_op_ns > 0
            ? fmt::format("unknown; {:.3f} ms yes by op", k.tensor_core_by_op_ns / 1e6)
            : "unknown";
    row(out, {escape(k.name), escape(k.family), escape(k.precision), unit,
              fmt::format("{}", k.count), fmt::format("{:.3f}", k.total_ns / 1e6)});
  }
  out += "</tbody></table>";
  if (!g->tensor_cores.on_cuda_cores.empty()) {
    out += "<h3>Tensor-Core-eligible ops that ran on CUDA cores</h3>";
    table_head(out, {"op", "shapes", "dtypes", "instances", "only CUDA cores", "CUDA core ms"});
    for (const EligibleOp& op : g->tensor_cores.on_cuda_cores)
      row(out,
          {escape(op.op), escape(op.shapes), escape(op.dtypes), fmt::format("{}", op.instances),
           fmt::format("{}", op.only_cuda_cores), fmt::format("{:.3f}", op.cuda_core_ns / 1e6)});
    out += "</tbody></table>";
  }
  return out;
}

// FLOPs counted in profiled steps, what they reached (MFU where a peak is known), and energy.
std::string achievement_table(const EpochSummary& e) {
  if (!e.flops && !e.energy) return {};
  std::string out = "<h3>What the steps achieved</h3><table class=\"kv\"><tbody>";
  auto gflop = [](double f) { return fmt::format("{:.3g} GFLOP", f / 1e9); };
  auto opt = [](const std::optional<double>& v, const char* spec, double scale = 1) {
    return v ? fmt::format(fmt::runtime(spec), *v * scale) : std::string("-");
  };
  if (e.flops && e.flops->profiled_steps > 0) {
    const FlopsSummary& f = *e.flops;
    row(out, {"FLOPs per step", fmt::format("{} (forward {}, backward {}; {} profiled steps, {})",
                                            gflop(f.per_step), gflop(f.forward), gflop(f.backward),
                                            f.profiled_steps, escape(f.dominant_dtype))});
    row(out, {"achieved", opt(f.step_flops_per_s, "{:.3g} TFLOP/s", 1e-12)});
    for (const PhaseThroughput& p : f.achieved)
      row(out, {"  " + escape(p.phase), opt(p.flops_per_s, "{:.3g} TFLOP/s", 1e-12) + " (" +
                                            escape(p.time_source) + " time)"});
    row(out, {"MFU", f.mfu ? fmt::format("{:.2f} % of {}", 100 * *f.mfu, escape(f.peak)) : "-"});
  }
  if (e.energy && e.energy->epoch_j)
    row(out, {"energy",
              fmt::format("{} per epoch, {} per step, {} per sample, {} mean ({})",
                          opt(e.energy->epoch_j, "{:.4g} J"), opt(e.energy->per_step_j, "{:.4g} J"),
                          opt(e.energy->per_sample_j, "{:.4g} J"),
                          opt(e.energy->average_w, "{:.1f} W"), escape(e.energy->source))});
  for (const auto* list :
       {e.flops ? &e.flops->not_measured : nullptr, e.energy ? &e.energy->not_measured : nullptr})
    if (list)
      for (const Unmeasured& u : *list)
        row(out, {"not measured: " + escape(u.what), escape(u.why)});
  return out + "</tbody></table>";
}

std::string telemetry_table(const EpochSummary& e) {
  if (!e.telemetry) return {};
  const DeviceTelemetry& t = *e.telemetry;
  auto opt = [](const std::optional<double>& v, const char* spec) {
    return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
  };
  std::string out = fmt::format("<h3>Device telemetry ({}, {} samples over {:.1f} s)</h3>",
                                escape(t.source), t.samples, t.duration_s);
  out += "<table class=\"kv\"><tbody>";
  row(out, {"device", escape(t.device_name)});
  row(out, {"GPU busy (NVML)", opt(t.gpu_utilization_pct_mean, "{:.1f} % mean") + ", " +
                                   opt(t.gpu_utilization_pct_max, "{:.0f} % max")});
  if (t.memory_used_bytes_max)
    row(out, {"memory used", bytes_text(*t.memory_used_bytes_max) + " peak of " +
                                 (t.memory_total_bytes ? bytes_text(*t.memory_total_bytes) : "-")});
  row(out,
      {"power", opt(t.power_w_mean, "{:.0f} W mean") + ", " + opt(t.power_w_max, "{:.0f} W max") +
                    ", limit " + opt(t.power_limit_w, "{:.0f} W")});
  row(out, {"energy", t.energy_j ? fmt::format("{:.1f} kJ", *t.energy_j / 1000) : "-"});
  row(out, {"SM clock", opt(t.sm_clock_mhz_mean, "{:.0f} MHz mean") + " of " +
                            opt(t.sm_clock_mhz_max, "{:.0f} MHz")});
  std::string reasons;
  for (const ThrottleShare& r : t.throttle)
    reasons += (reasons.empty() ? "" : ", ") + escape(r.reason) + " " + pct(r.share);
  row(out, {"clock event reasons", reasons.empty() ? "none" : reasons});
  const PcieLinkState& l = t.pcie;
  auto i = [](const std::optional<int>& v) { return v ? std::to_string(*v) : std::string("-"); };
  row(out,
      {"PCIe link", fmt::format("gen {} x{}{} (supports gen {} x{})", i(l.gen), i(l.width),
                                l.under_load ? " under load" : "", i(l.max_gen), i(l.max_width))});
  if (t.nvlinks_active) row(out, {"NVLink links up", fmt::format("{}", *t.nvlinks_active)});
  out += "</tbody></table>";
  for (const Unmeasured& u : t.not_measured)
    fmt::format_to(std::back_inserter(out), "<p class=\"muted\">not measured: {}: {}</p>",
                   escape(u.what), escape(u.why));
  return out;
}

std::string hardware_fit_table(const EpochSummary& e, const Environment& env) {
  const std::optional<HardwareFit> fitted = epoch_hardware_fit(e, env);
  if (!fitted) return {};
  const HardwareFit& fit = *fitted;
  const MemoryFootprint& m = *e.footprint;
  // As in the terminal: a reason every configuration shares said once, no GPU cards on a CPU run.
  const std::optional<std::string> none_estimated = shared_not_estimated_reason(fit);
  std::string out = "<h3>Hardware fit</h3>";
  fmt::format_to(std::back_inserter(out),
                 "<p>Measured: parameters {} ({} values), gradients {}, optimizer state {}, "
                 "activations {}. Overhead {} ({}), allocator fragmentation x{:.2f}.</p>",
                 bytes_text(m.parameter_bytes), m.parameter_count, bytes_text(m.gradient_bytes),
                 m.optimizer_state_bytes ? bytes_text(static_cast<double>(*m.optimizer_state_bytes))
                                         : std::string("not measured (no optimizer watched)"),
                 m.activation_bytes ? bytes_text(static_cast<double>(*m.activation_bytes))
                 : none_estimated   ? std::string("not measured")
                                    : "not measured (" + escape(m.activation_why) + ")",
                 bytes_text(fit.overhead_bytes), fit.overhead_measured ? "measured" : "assumed",
                 fit.fragmentation);
  if (none_estimated)
    return out + "<p class=\"muted\">Configurations not estimated: " + escape(*none_estimated) +
           "</p>";
  const bool cards = fit.cards_compared;
  out += "<table><thead><tr><th>configuration</th><th>needs</th>";
  if (cards)
    for (const CardSize& c : kFitCards)
      fmt::format_to(std::back_inserter(out), "<th>{}</th>", escape(c.label));
  out += "</tr></thead><tbody>";
  for (const FitVariant& v : fit.variants) {
    std::string name = v.mixed_precision ? "mixed precision" : "fp32";
    if (v.checkpointing) name += " + checkpointing";
    if (v.as_run) name += " (as run)";
    out += "<tr><td class=\"text\">" + escape(name) + "</td>";
    if (!v.need_bytes) {
      fmt::format_to(std::back_inserter(out),
                     "<td class=\"text\" colspan=\"{}\">not estimated: {}</td></tr>",
                     cards ? std::size(kFitCards) + 1 : 1, escape(v.why));
      continue;
    }
    out += "<td>" + bytes_text(*v.need_bytes) + "</td>";
    if (cards)
      for (Fit f : v.cards)
        out += std::string("<td>") +
               (f == Fit::Fits    ? "fits"
                : f == Fit::Tight ? "tight"
                                  : "no") +
               "</td>";
    out += "</tr>";
  }
  return out + "</tbody></table>";
}

}  // namespace fathom::html_report
