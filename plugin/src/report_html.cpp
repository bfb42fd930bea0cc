// The self-contained HTML report: one file, inline CSS, inline SVG charts and a small inline
// script (epoch tabs, sortable tables). Nothing is fetched from the network. Every string that
// comes from the report (run, device, kernel, op and module names, findings) goes through
// html::escape; colors and numbers are fathom's own.
#include <fathom/gpu_summary.h>
#include <fathom/hardware_fit.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "html_charts.h"

namespace fathom {
namespace {

using html::escape;

constexpr const char* kPhaseColors[kPhaseCount] = {"#9c9c9c", "#f2a541", "#4e79a7", "#e15759",
                                                   "#59a14f"};
constexpr const char* kOutsideColor = "#d9d9d9";

constexpr const char* kStyle = R"css(
:root{--fg:#1d232b;--muted:#5f6b7a;--line:#dde3ea;--bg:#f6f8fa;--crit:#b42318;--warn:#b54708;--info:#175cd3}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);margin:0;background:#fff}
header{background:#12263a;color:#fff;padding:16px 28px}
header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c9d6e3}
main{padding:8px 28px 40px;max-width:1180px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}
th{background:var(--bg);cursor:pointer;user-select:none}
td.text{text-align:left;white-space:normal}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:16px}
.chart-figure{margin:0;border:1px solid var(--line);border-radius:6px;padding:10px}
.chart-figure figcaption{font-weight:600;margin-bottom:4px}
svg.chart{width:100%;height:auto;display:block}
svg .grid{stroke:#e8ecf0;stroke-width:1}
svg .tick,svg .unit{font-size:11px;fill:var(--muted)}
svg .marker{stroke:#222;stroke-width:2.5;stroke-dasharray:4 2}
.legend{list-style:none;padding:0;margin:6px 0 0;display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;color:var(--muted)}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.caption{font-size:12px;color:var(--muted);margin:6px 0 0}
.not-measured-text{color:var(--muted);font-style:italic;margin:24px 0;text-align:center}
.tabs{display:flex;gap:6px;flex-wrap:wrap;margin:16px 0 0}
.tabs button{border:1px solid var(--line);background:var(--bg);padding:5px 12px;border-radius:5px;cursor:pointer;font:inherit}
.tabs button[aria-selected=true]{background:#12263a;color:#fff;border-color:#12263a}
.finding{border:1px solid var(--line);border-left:5px solid var(--info);border-radius:6px;padding:8px 14px;margin:10px 0}
.finding.critical{border-left-color:var(--crit)}.finding.warning{border-left-color:var(--warn)}
.finding h4{margin:2px 0 6px;font-size:15px}
.badge{font-size:11px;text-transform:uppercase;font-weight:700;letter-spacing:.04em;margin-right:8px}
.critical .badge{color:var(--crit)}.warning .badge{color:var(--warn)}.info .badge{color:var(--info)}
.id{color:var(--muted);font-size:12px;font-weight:400}
.applied{background:#dcfae6;color:#067647;font-size:11px;padding:1px 6px;border-radius:4px;margin-left:6px}
pre{background:#0f1720;color:#e6edf3;padding:10px 12px;border-radius:5px;overflow:auto;font-size:12.5px}
.kv td{text-align:left}
.stats{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.stat{background:var(--bg);border-radius:6px;padding:8px 14px;min-width:130px}
.stat b{display:block;font-size:18px}
.stat span{color:var(--muted);font-size:12px}
.muted{color:var(--muted)}
)css";

// Epoch tabs (the last epoch shown first), sortable tables, and a marker that tells a headless
// browser (tests/core/report_html_render_test) the script ran to its end.
constexpr const char* kScript = R"js(
(function () {
  'use strict';
  var tabs = Array.prototype.slice.call(document.querySelectorAll('[data-epoch-tab]'));
  var panels = Array.prototype.slice.call(document.querySelectorAll('[data-epoch-panel]'));
  function show(id) {
    panels.forEach(function (p) { p.hidden = p.getAttribute('data-epoch-panel') !== id; });
    tabs.forEach(function (t) {
      t.setAttribute('aria-selected', String(t.getAttribute('data-epoch-tab') === id));
    });
  }
  tabs.forEach(function (t) {
    t.addEventListener('click', function () { show(t.getAttribute('data-epoch-tab')); });
  });
  if (tabs.length) show(tabs[tabs.length - 1].getAttribute('data-epoch-tab'));
  function cellValue(td) {
    var v = td.getAttribute('data-sort');
    if (v !== null) return parseFloat(v);
    var n = parseFloat(td.textContent);
    return isNaN(n) ? td.textContent : n;
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    Array.prototype.forEach.call(table.querySelectorAll('th'), function (th, col) {
      th.addEventListener('click', function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = th.getAttribute('data-order') !== 'asc';
        rows.sort(function (a, b) {
          var x = cellValue(a.cells[col]), y = cellValue(b.cells[col]);
          return (x > y ? 1 : x < y ? -1 : 0) * (asc ? 1 : -1);
        });
        th.setAttribute('data-order', asc ? 'asc' : 'desc');
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.documentElement.setAttribute('data-fathom-rendered',
      String(document.querySelectorAll('svg.chart').length));
})();
)js";

std::string bytes_text(double b) {
  if (b >= 1073741824.0) return fmt::format("{:.2f} GiB", b / 1073741824.0);
  if (b >= 1048576.0) return fmt::format("{:.1f} MiB", b / 1048576.0);
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{:.0f} B", b);
}

std::string pct(double fraction) { return fmt::format("{:.1f} %", 100 * fraction); }

// The reason a report gives for something it did not measure, matched on the `what` text.
std::string why_not(const Environment& env, std::string_view what_contains, std::string fallback) {
  for (const Unmeasured& u : env.not_measured)
    if (u.what.find(what_contains) != std::string::npos) return u.what + ": " + u.why;
  return fallback;
}

// The GPU section of an epoch, when the report has one.
const GpuSummary* gpu_of(const EpochSummary& e) { return e.gpu ? &*e.gpu : nullptr; }

void row(std::string& out, std::initializer_list<std::string> cells) {
  out += "<tr>";
  bool first = true;
  for (const std::string& c : cells) {
    out += first ? "<td class=\"text\">" : "<td>";
    out += c;  // already escaped by the caller
    out += "</td>";
    first = false;
  }
  out += "</tr>";
}

void table_head(std::string& out, std::initializer_list<const char*> heads, bool sortable = true) {
  out += sortable ? "<table class=\"sortable\"><thead><tr>" : "<table><thead><tr>";
  for (const char* h : heads) fmt::format_to(std::back_inserter(out), "<th>{}</th>", h);
  out += "</tr></thead><tbody>";
}

// --- run-level charts --------------------------------------------------------------------------

std::string step_time_chart(const RunReport& r) {
  html::BarChart c;
  c.title = "Step time by phase";
  c.unit = "ms per step";
  c.stacked = true;
  for (const EpochSummary& e : r.epochs) c.categories.push_back(fmt::format("epoch {}", e.index));
  bool outside_any = false;
  std::vector<std::optional<double>> outside;
  for (Phase p : kAllPhases) {
    html::Series s{std::string(phase_name(p)), kPhaseColors[static_cast<std::size_t>(p)], {}};
    bool any = false;
    for (const EpochSummary& e : r.epochs) {
      const PhaseSummary& ps = e.phase(p);
      if (ps.count == 0 || e.steps == 0) {
        s.values.push_back(std::nullopt);
        continue;
      }
      any = true;
      s.values.push_back(ps.wall_ms_total / e.steps);
    }
    if (p == Phase::Data && any) s.name += " (wait before the step)";
    if (any) c.series.push_back(std::move(s));
  }
  for (const EpochSummary& e : r.epochs) {
    double in = 0;
    for (const PhaseSummary& p : e.phases)
      if (p.phase != Phase::Data) in += p.wall_ms_total;
    const double gap = e.steps ? (e.step_ms_total - in) / e.steps : 0;
    outside.push_back(gap > 0.005 * e.step_ms_mean() ? std::optional<double>(gap) : std::nullopt);
    outside_any = outside_any || outside.back().has_value();
  }
  if (outside_any) c.series.push_back({"outside any phase", kOutsideColor, outside});
  if (c.series.empty()) return html::not_measured_chart(c.title, "no step ran a phase scope");
  return html::bar_chart(
      c, "Mean wall time per step of each phase; the data phase is the wait before a step.");
}

std::string memory_chart(const RunReport& r) {
  bool device = false, rss = false;
  for (const EpochSummary& e : r.epochs)
    for (const PhaseSummary& p : e.phases)
      device = device || p.device_memory, rss = rss || p.rss_bytes_max;
  const std::string title = "Memory per phase across epochs";
  if (!device && !rss)
    return html::not_measured_chart(title, why_not(r.environment, "device memory",
                                                   "no memory figure was recorded for any phase"));
  html::BarChart c;
  c.title = title;
  c.unit = "GiB";
  for (const EpochSummary& e : r.epochs) c.categories.push_back(fmt::format("epoch {}", e.index));
  for (Phase p : kAllPhases) {
    html::Series s{std::string(phase_name(p)), kPhaseColors[static_cast<std::size_t>(p)], {}};
    bool any = false;
    for (const EpochSummary& e : r.epochs) {
      const PhaseSummary& ps = e.phase(p);
      std::optional<double> v;
      if (device && ps.device_memory) v = ps.device_memory->peak_allocated_bytes / 1073741824.0;
      if (!device && ps.rss_bytes_max) v = *ps.rss_bytes_max / 1073741824.0;
      any = any || v.has_value();
      s.values.push_back(v);
    }
    if (any) c.series.push_back(std::move(s));
  }
  const std::string caption =
      device
          ? "Peak bytes allocated by the caching allocator during each phase."
          : "Process resident memory (CPU) at the end of each phase. Device memory not measured: " +
                why_not(r.environment, "device memory", "no device memory figures in this report");
  return html::bar_chart(c, caption);
}

// --- epoch-level charts --------------------------------------------------------------------------

std::string tensor_core_chart(const EpochSummary& e, const Environment& env) {
  const std::string title = "Tensor Core share of kernel time";
  const GpuSummary* g = gpu_of(e);
  if (!g || !g->gpu_activity || g->tensor_cores.kernel_ns <= 0)
    return html::not_measured_chart(title,
                                    why_not(env, "CUPTI", "no GPU kernel records in this report"));
  const TensorCoreResult& tc = g->tensor_cores;
  html::HBarChart c;
  c.title = title;
  c.unit = "ms of kernel time";
  // Unknown kernels get their own segment: the name said neither, and they are not CUDA cores.
  const bool any_unknown = tc.decisions.unknown.ns > 0;
  auto add = [&](std::string label, std::int64_t tc_ns, std::int64_t unknown_ns,
                 std::int64_t all_ns) {
    std::vector<html::HBarSegment> segments = {
        {"Tensor Cores", "#59a14f", tc_ns / 1e6},
        {"CUDA cores", "#e15759", std::max<std::int64_t>(all_ns - tc_ns - unknown_ns, 0) / 1e6}};
    if (any_unknown) segments.push_back({"unknown", "#bab0ac", unknown_ns / 1e6});
    c.rows.push_back({std::move(label), std::move(segments), std::nullopt, ""});
  };
  add("all kernels", tc.tensor_core_ns, tc.decisions.unknown.ns, tc.kernel_ns);
  for (const PhaseTensorCores& p : tc.phases)
    add(p.phase, p.tensor_core_ns, p.unknown_ns, p.kernel_ns);
  std::string caption;
  if (tc.share) {
    const TensorCoreDecisions& d = tc.decisions;
    caption = fmt::format(
        "Tensor Core share: {} of compute-kernel time. Decided by kernel name: {:.1f} ms on Tensor "
        "Cores, {:.1f} ms on CUDA cores; by the launching op: {:.1f} ms on Tensor Cores; unknown: "
        "{:.1f} ms.",
        pct(*tc.share), d.tensor_cores_by_name.ns / 1e6, d.cuda_cores_by_name.ns / 1e6,
        d.tensor_cores_by_op.ns / 1e6, d.unknown.ns / 1e6);
    if (const std::string note = undecided_kernels_note(tc); !note.empty())
      caption += " " + note + ".";
  }
  return html::hbar_chart(c, caption);
}

std::string transfer_chart(const EpochSummary& e, const Environment& env) {
  const std::string title = "Transfer bandwidth against the link's peak";
  const GpuSummary* g = gpu_of(e);
  html::HBarChart c;
  c.title = title;
  c.unit = "GB/s";
  if (g && g->gpu_activity) {
    for (const TransferDirection& d : g->transfers.directions) {
      if (!d.gb_per_s) continue;
      const bool host =
          d.direction == MemcpyKind::HostToDevice || d.direction == MemcpyKind::DeviceToHost;
      c.rows.push_back({std::string(memcpy_kind_name(d.direction)),
                        {{"achieved (copy records)", "#4e79a7", *d.gb_per_s}},
                        host ? g->transfers.link.gb_per_s : std::nullopt,
                        "link peak"});
    }
    if (!c.rows.empty())
      return html::hbar_chart(
          c, "Link: " + g->transfers.link.description + ". Bytes over copy time, per direction.");
  }
  if (e.telemetry &&
      (e.telemetry->pcie_rx_bytes_per_s_mean || e.telemetry->pcie_tx_bytes_per_s_mean)) {
    const PcieLinkState& l = e.telemetry->pcie;
    std::optional<double> peak;
    if (l.gen && l.width)
      if (auto p = pcie_peak_bytes_per_s(*l.gen, *l.width)) peak = *p / 1e9;
    auto add = [&](const char* label, const std::optional<double>& mean,
                   const std::optional<double>& max) {
      if (!mean) return;
      std::vector<html::HBarSegment> seg{{"mean traffic (NVML)", "#4e79a7", *mean / 1e9}};
      if (max && *max > *mean)
        seg.push_back({"up to the max sample", "#a0cbe8", (*max - *mean) / 1e9});
      c.rows.push_back({label, seg, peak, "link peak"});
    };
    add("to device", e.telemetry->pcie_rx_bytes_per_s_mean, e.telemetry->pcie_rx_bytes_per_s_max);
    add("from device", e.telemetry->pcie_tx_bytes_per_s_mean, std::nullopt);
    return html::hbar_chart(c,
                            "PCIe traffic sampled by NVML (all traffic, not only copies). Copy "
                            "records not measured: " +
                                why_not(env, "CUPTI", "no GPU copy records in this report"));
  }
  return html::not_measured_chart(title,
                                  why_not(env, "CUPTI", "no GPU copy records in this report"));
}

std::string busy_chart(const EpochSummary& e, const Environment& env) {
  const std::string title = "GPU busy and idle";
  const GpuSummary* g = gpu_of(e);
  if (g && g->gpu_activity && g->timeline.window_ns > 0 && !g->timeline.devices.empty()) {
    html::HBarChart c;
    c.title = title;
    c.unit = "% of the steps";
    c.max = 100;
    for (const DeviceTimeline& d : g->timeline.devices) {
      const double w = static_cast<double>(g->timeline.window_ns) / 100.0;
      c.rows.push_back({fmt::format("GPU {}", d.device),
                        {{"busy", "#59a14f", d.busy_ns / w},
                         {"idle: data wait", "#9c9c9c", d.idle.data_wait_ns / w},
                         {"idle: host sync", "#e15759", d.idle.sync_ns / w},
                         {"idle: late launches", "#f2a541", d.idle.host_launch_ns / w},
                         {"idle: other", "#d9d9d9", d.idle.other_ns / w}},
                        std::nullopt,
                        ""});
    }
    return html::hbar_chart(
        c, "Busy: kernels, copies and memsets. Idle split by what the host was doing.");
  }
  if (e.telemetry && !e.telemetry->series.empty() && e.telemetry->gpu_utilization_pct_mean) {
    html::LineChart c;
    c.title = title;
    c.x_unit = "seconds into the epoch";
    c.y_unit = "% busy (NVML)";
    c.y_max = 100;
    html::LineSeries s{"GPU utilization", "#4e79a7", {}};
    for (const TelemetryPoint& p : e.telemetry->series)
      if (p.gpu_utilization_pct) s.points.push_back({p.t_s, *p.gpu_utilization_pct});
    c.series.push_back(std::move(s));
    return html::line_chart(
        c, fmt::format("NVML utilization: the share of each sample period in which any kernel ran; "
                       "mean {:.1f} %. Idle causes need GPU records: {}",
                       *e.telemetry->gpu_utilization_pct_mean,
                       why_not(env, "CUPTI", "not in this report")));
  }
  return html::not_measured_chart(
      title, why_not(env, "CUPTI", "no GPU records") + "; " +
                 why_not(env, "NVML", "no device telemetry (NVML) in this report"));
}

// --- epoch-level tables and findings ------------------------------------------------------------

std::string stats(const EpochSummary& e) {
  std::string out = "<div class=\"stats\">";
  auto stat = [&](std::string value, const char* label) {
    fmt::format_to(std::back_inserter(out), "<div class=\"stat\"><b>{}</b><span>{}</span></div>",
                   escape(value), label);
  };
  stat(fmt::format("{:.2f} ms", e.step_ms_mean()), "step time, mean");
  stat(fmt::format("{:.1f}", e.samples_per_second()), "samples per second");
  stat(fmt::format("{}", e.steps), e.failed_steps ? "steps (some failed)" : "steps");
  stat(fmt::format("{:.2f} s", e.wall_ms / 1000), "epoch wall time");
  if (e.device_memory)
    stat(bytes_text(e.device_memory->peak_reserved_bytes), "peak device memory reserved");
  if (e.telemetry && e.telemetry->energy_j)
    stat(fmt::format("{:.1f} kJ", *e.telemetry->energy_j / 1000), "GPU energy");
  return out + "</div>";
}

std::string findings_html(const EpochSummary& e) {
  if (e.findings.empty()) return "<p class=\"muted\">No finding above the thresholds.</p>";
  std::string out;
  for (const Finding& f : e.findings) {
    const std::string sev(severity_name(f.severity));
    fmt::format_to(std::back_inserter(out),
                   "<section class=\"finding {}\"><h4><span class=\"badge\">{}</span>{} <span "
                   "class=\"id\">{}</span>{}</h4>",
                   sev, sev, escape(f.title), escape(f.id),
                   f.applied ? "<span class=\"applied\">applied by fathom</span>" : "");
    if (!f.evidence.empty()) {
      out += "<table class=\"kv\"><tbody>";
      for (const Evidence& ev : f.evidence) row(out, {escape(ev.name), escape(ev.value)});
      out += "</tbody></table>";
    }
    if (!f.why.empty()) fmt::format_to(std::back_inserter(out), "<p>{}</p>", escape(f.why));
    if (!f.estimated_gain.empty())
      fmt::format_to(std::back_inserter(out), "<p><b>Estimated gain:</b> {}</p>",
                     escape(f.estimated_gain));
    if (!f.fix.empty())
      fmt::format_to(std::back_inserter(out), "<pre><code>{}</code></pre>", escape(f.fix));
    out += "</section>";
  }
  return out;
}

std::string phase_table(const EpochSummary& e) {
  std::string out;
  table_head(out, {"phase", "count", "ms per step", "share of step", "device ms per step",
                   "peak allocated", "peak reserved", "RSS max"});
  for (const PhaseSummary& p : e.phases) {
    if (p.count == 0) continue;
    const double per_step = e.steps ? p.wall_ms_total / e.steps : 0;
    const double step = e.step_ms_mean();
    row(out,
        {escape(std::string(phase_name(p.phase)) + (p.inferred ? " (gap between steps)" : "")),
         fmt::format("{}", p.count), fmt::format("{:.2f}", per_step),
         step > 0 ? pct(per_step / step) : "-",
         p.device_ms_total && e.steps ? fmt::format("{:.2f}", *p.device_ms_total / e.steps) : "-",
         p.device_memory ? bytes_text(p.device_memory->peak_allocated_bytes) : "-",
         p.device_memory ? bytes_text(p.device_memory->peak_reserved_bytes) : "-",
         p.rss_bytes_max ? bytes_text(*p.rss_bytes_max) : "-"});
  }
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

std::string hardware_fit_table(const EpochSummary& e) {
  if (!e.footprint) return {};
  const MemoryFootprint& m = *e.footprint;
  const HardwareFit fit = hardware_fit(
      m, e.device_memory, e.telemetry ? e.telemetry->memory_used_bytes_max : std::nullopt);
  std::string out = "<h3>Hardware fit</h3>";
  fmt::format_to(std::back_inserter(out),
                 "<p>Measured: parameters {} ({} values), gradients {}, optimizer state {}, "
                 "activations {}. Overhead {} ({}), allocator fragmentation x{:.2f}.</p>",
                 bytes_text(m.parameter_bytes), m.parameter_count, bytes_text(m.gradient_bytes),
                 m.optimizer_state_bytes ? bytes_text(static_cast<double>(*m.optimizer_state_bytes))
                                         : std::string("not measured (no optimizer watched)"),
                 bytes_text(m.activation_bytes), bytes_text(fit.overhead_bytes),
                 fit.overhead_measured ? "measured" : "assumed", fit.fragmentation);
  out += "<table><thead><tr><th>configuration</th><th>needs</th>";
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
                     std::size(kFitCards) + 1, escape(v.why));
      continue;
    }
    out += "<td>" + bytes_text(*v.need_bytes) + "</td>";
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

std::string epoch_panel(const EpochSummary& e, const Environment& env) {
  std::string out = fmt::format("<section class=\"epoch\" data-epoch-panel=\"{}\">", e.index);
  fmt::format_to(std::back_inserter(out), "<h2>Epoch {}{}</h2>", e.index,
                 e.ended_by_exception ? " (ended by an exception)" : "");
  out += stats(e);
  out += "<div class=\"charts\">";
  out += tensor_core_chart(e, env);
  out += transfer_chart(e, env);
  out += busy_chart(e, env);
  out += "</div>";
  fmt::format_to(std::back_inserter(out), "<h3>Findings ({})</h3>", e.findings.size());
  out += findings_html(e);
  out += "<h3>Phases</h3>";
  out += phase_table(e);
  out += copies_table(e);
  out += top_kernels_table(e);
  out += telemetry_table(e);
  out += hardware_fit_table(e);
  return out + "</section>";
}

}  // namespace

std::string format_html_report(const RunReport& r) {
  const Environment& env = r.environment;
  std::string out =
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">";
  fmt::format_to(std::back_inserter(out),
                 "<title>fathom report: {}</title><style>{}</style></head><body>",
                 escape(r.run_name), kStyle);
  fmt::format_to(std::back_inserter(out),
                 "<header><h1>fathom report: {}</h1><p>{}{} | fathom {} | torch {} | mode {} | "
                 "started {} | host {} (pid {})</p></header><main>",
                 escape(r.run_name), escape(env.device),
                 env.device_name.empty() ? "" : " (" + escape(env.device_name) + ")",
                 escape(env.fathom_version),
                 escape(env.torch_version.empty() ? "-" : env.torch_version), escape(env.mode),
                 escape(env.started_at), escape(env.hostname), env.pid);
  if (r.epochs.empty()) {
    out += "<p>No epoch has ended in this report.</p>";
  } else {
    // Top findings of the last epoch first: what a reader came for.
    const EpochSummary& last = r.epochs.back();
    fmt::format_to(std::back_inserter(out), "<h2>Top findings (epoch {})</h2>", last.index);
    if (last.findings.empty()) {
      out += "<p class=\"muted\">No finding above the thresholds.</p>";
    } else {
      out += "<ol>";
      for (std::size_t i = 0; i < std::min<std::size_t>(3, last.findings.size()); ++i) {
        const Finding& f = last.findings[i];
        fmt::format_to(std::back_inserter(out), "<li><b>{}</b>: {}{}</li>",
                       severity_name(f.severity), escape(f.title),
                       f.estimated_gain.empty() ? "" : " — " + escape(f.estimated_gain));
      }
      out += "</ol>";
    }
    out += "<h2>Run overview</h2>";
    table_head(out, {"epoch", "steps", "samples/s", "step ms mean", "step ms max", "findings"});
    for (const EpochSummary& e : r.epochs)
      row(out,
          {fmt::format("{}", e.index), fmt::format("{}", e.steps),
           fmt::format("{:.1f}", e.samples_per_second()), fmt::format("{:.2f}", e.step_ms_mean()),
           fmt::format("{:.2f}", e.step_ms_max), fmt::format("{}", e.findings.size())});
    out += "</tbody></table><div class=\"charts\">";
    out += step_time_chart(r);
    out += memory_chart(r);
    out += "</div>";
    out += "<nav class=\"tabs\" aria-label=\"epochs\">";
    for (const EpochSummary& e : r.epochs)
      fmt::format_to(
          std::back_inserter(out),
          "<button type=\"button\" data-epoch-tab=\"{}\" aria-selected=\"false\">epoch {}</button>",
          e.index, e.index);
    out += "</nav>";
    for (const EpochSummary& e : r.epochs) out += epoch_panel(e, env);
  }
  if (!env.not_measured.empty()) {
    out += "<h2>Not measured in this run</h2><ul>";
    for (const Unmeasured& u : env.not_measured)
      fmt::format_to(std::back_inserter(out), "<li><b>{}</b>: {}</li>", escape(u.what),
                     escape(u.why));
    out += "</ul>";
  }
  fmt::format_to(
      std::back_inserter(out),
      "<p class=\"muted\">Report schema {}. Numbers are measured; what was not measured says "
      "so.</p></main><script>{}</script></body></html>\n",
      r.schema_version, kScript);
  return out;
}

}  // namespace fathom
