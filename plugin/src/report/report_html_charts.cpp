// The HTML report's charts: step time and memory per epoch, Tensor Core share, transfers
// and device busy time per epoch. Each says plainly what it lacks when the report has no figures.
#include <fathom/device_telemetry.h>
#include <fathom/gpu_summary.h>
#include <fathom/hardware_fit.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "analyze/tensor_core_analysis.h"
#include "analyze/transfer_analysis.h"
#include "base/bytes_text.h"
#include "report/html_charts.h"
#include "report/report_html_parts.h"

namespace fathom::html_report {

using detail::bytes_text;
using html::escape;

// --- run-level charts --------------------------------------------------------------------------

EpochDigest digest_of(const EpochSummary& e) {
  EpochDigest d;
  d.index = e.index;
  d.last_index = e.index;
  d.steps = e.steps;
  d.samples_per_second = e.samples_per_second();
  d.step_ms_mean = e.step_ms_mean();
  d.step_ms_max = e.step_ms_max;
  d.step_ms_total = e.step_ms_total;
  d.findings = e.findings.size();
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    const PhaseSummary& p = e.phases[i];
    EpochDigest::PhaseDigest& q = d.phases[i];
    q.phase = p.phase;
    q.count = p.count;
    q.wall_ms_total = p.wall_ms_total;
    if (p.device_memory) q.peak_allocated_bytes = p.device_memory->peak_allocated_bytes;
    q.rss_bytes_max = p.rss_bytes_max;
  }
  return d;
}

std::vector<EpochDigest> epoch_bars(const std::vector<EpochDigest>& epochs, std::size_t max_bars) {
  if (max_bars == 0 || epochs.size() <= max_bars) return epochs;
  const std::size_t per_bar = (epochs.size() + max_bars - 1) / max_bars;
  std::vector<EpochDigest> bars;
  bars.reserve((epochs.size() + per_bar - 1) / per_bar);
  auto higher = [](std::optional<std::int64_t>& into, const std::optional<std::int64_t>& v) {
    if (v) into = into ? std::max(*into, *v) : *v;
  };
  for (std::size_t first = 0; first < epochs.size(); first += per_bar) {
    EpochDigest b = epochs[first];
    for (std::size_t i = first + 1; i < std::min(first + per_bar, epochs.size()); ++i) {
      const EpochDigest& e = epochs[i];
      b.last_index = e.last_index;
      b.steps += e.steps;
      b.step_ms_total += e.step_ms_total;
      b.step_ms_max = std::max(b.step_ms_max, e.step_ms_max);
      b.findings += e.findings;
      for (std::size_t k = 0; k < kPhaseCount; ++k) {
        b.phases[k].count += e.phases[k].count;
        b.phases[k].wall_ms_total += e.phases[k].wall_ms_total;
        higher(b.phases[k].peak_allocated_bytes, e.phases[k].peak_allocated_bytes);
        higher(b.phases[k].rss_bytes_max, e.phases[k].rss_bytes_max);
      }
    }
    b.step_ms_mean = b.steps ? b.step_ms_total / b.steps : 0;
    b.samples_per_second = 0;  // not mergeable from the digests; no chart reads it
    bars.push_back(b);
  }
  return bars;
}

namespace {

std::string bar_label(const EpochDigest& d) {
  return d.last_index == d.index ? fmt::format("epoch {}", d.index)
                                 : fmt::format("epochs {}-{}", d.index, d.last_index);
}

// What a caption adds when the bars are runs of epochs.
std::string merged_note(const std::vector<EpochDigest>& bars, std::size_t epochs,
                        std::string_view how) {
  if (bars.size() == epochs) return "";
  return fmt::format(
      " The run's {} epochs are drawn as {} bars of up to {} consecutive epochs ({}).", epochs,
      bars.size(), bars.front().last_index - bars.front().index + 1, how);
}

}  // namespace

std::string step_time_chart(const std::vector<EpochDigest>& run) {
  const std::vector<EpochDigest> epochs = epoch_bars(run);
  html::BarChart c;
  c.title = "Step time by phase";
  c.unit = "ms per step";
  c.stacked = true;
  for (const EpochDigest& e : epochs) c.categories.push_back(bar_label(e));
  bool outside_any = false;
  std::vector<std::optional<double>> outside;
  for (Phase p : kAllPhases) {
    html::Series s{std::string(phase_name(p)), kPhaseColors[static_cast<std::size_t>(p)], {}};
    bool any = false;
    for (const EpochDigest& e : epochs) {
      const EpochDigest::PhaseDigest& ps = e.phases[static_cast<std::size_t>(p)];
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
  for (const EpochDigest& e : epochs) {
    double in = 0;
    for (const EpochDigest::PhaseDigest& p : e.phases)
      if (p.phase != Phase::Data) in += p.wall_ms_total;
    const double gap = e.steps ? (e.step_ms_total - in) / e.steps : 0;
    outside.push_back(gap > 0.005 * e.step_ms_mean ? std::optional<double>(gap) : std::nullopt);
    outside_any = outside_any || outside.back().has_value();
  }
  if (outside_any) c.series.push_back({"outside any phase", kOutsideColor, outside});
  if (c.series.empty()) return html::not_measured_chart(c.title, "no step ran a phase scope");
  return html::bar_chart(
      c, "Mean wall time per step of each phase; the data phase is the wait before a step." +
             merged_note(epochs, run.size(), "the mean over their steps"));
}

std::string memory_chart(const std::vector<EpochDigest>& run, const Environment& env) {
  const std::vector<EpochDigest> epochs = epoch_bars(run);
  bool device = false, rss = false;
  for (const EpochDigest& e : epochs)
    for (const EpochDigest::PhaseDigest& p : e.phases)
      device = device || p.peak_allocated_bytes, rss = rss || p.rss_bytes_max;
  const std::string title = "Memory per phase across epochs";
  if (!device && !rss)
    return html::not_measured_chart(title, why_not(env, UnmeasuredId::DeviceMemory,
                                                   "no memory figure was recorded for any phase"));
  html::BarChart c;
  c.title = title;
  c.unit = "GiB";
  for (const EpochDigest& e : epochs) c.categories.push_back(bar_label(e));
  for (Phase p : kAllPhases) {
    html::Series s{std::string(phase_name(p)), kPhaseColors[static_cast<std::size_t>(p)], {}};
    bool any = false;
    for (const EpochDigest& e : epochs) {
      const EpochDigest::PhaseDigest& ps = e.phases[static_cast<std::size_t>(p)];
      std::optional<double> v;
      if (device && ps.peak_allocated_bytes) v = *ps.peak_allocated_bytes / 1073741824.0;
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
                why_not(env, UnmeasuredId::DeviceMemory, "no device memory figures in this report");
  return html::bar_chart(c,
                         caption + merged_note(epochs, run.size(), "the highest of their figures"));
}

// --- epoch-level charts --------------------------------------------------------------------------

std::string tensor_core_chart(const EpochSummary& e, const Environment& env) {
  const std::string title = "Tensor Core share of kernel time";
  const GpuSummary* g = gpu_of(e);
  if (!g || !g->gpu_activity || g->tensor_cores.kernel_ns <= 0)
    return html::not_measured_chart(
        title, why_not(env, UnmeasuredId::GpuActivity, "no GPU kernel records in this report"));
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
    return html::hbar_chart(
        c,
        "PCIe traffic sampled by NVML (all traffic, not only copies). Copy "
        "records not measured: " +
            why_not(env, UnmeasuredId::GpuActivity, "no GPU copy records in this report"));
  }
  return html::not_measured_chart(
      title, why_not(env, UnmeasuredId::GpuActivity, "no GPU copy records in this report"));
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
                       why_not(env, UnmeasuredId::GpuActivity, "not in this report")));
  }
  return html::not_measured_chart(
      title,
      why_not(env, UnmeasuredId::GpuActivity, "no GPU records") + "; " +
          why_not(env, UnmeasuredId::DeviceTelemetry, "no device telemetry (NVML) in this report"));
}

// The epoch's steps one by one, with the change point drawn as the medians on each side, and
// the memory per step with the creep's trend.
std::string step_series_charts(const EpochSummary& e) {
  if (!e.series || e.series->points.size() < 2) return {};
  const StepSeries& s = *e.series;
  std::string out;
  html::LineChart c;
  c.title = "Step time, step by step";
  c.x_unit = "step";
  c.y_unit = "ms";
  html::LineSeries steps{"step time", "#4e79a7", {}};
  for (const StepPoint& p : s.points) steps.points.push_back({double(p.step), p.step_ms});
  c.series.push_back(std::move(steps));
  std::string caption = s.stride > 1 ? fmt::format("every {}th step. ", s.stride) : std::string();
  if (s.change) {
    const double first = double(s.points.front().step), last = double(s.points.back().step);
    const double at = double(s.change->step);
    c.series.push_back(
        {"median before", "#59a14f", {{first, s.change->before_ms}, {at, s.change->before_ms}}});
    c.series.push_back(
        {"median after", "#e15759", {{at, s.change->after_ms}, {last, s.change->after_ms}}});
    caption += fmt::format(
        "Step time rose {:.0f}% from step {} ({:.2f} -> {:.2f} ms; Pettitt p = {:.1e}){}.",
        100 * s.change->relative, s.change->step, s.change->before_ms, s.change->after_ms,
        s.change->p_value, s.change->phase.empty() ? "" : ", " + s.change->phase + " grew most");
  } else {
    caption += "No change point: a rank test over the steps found none that held.";
  }
  out += html::line_chart(c, caption);
  html::LineChart m;
  m.title = "Memory per step";
  m.x_unit = "step";
  m.y_unit = "MiB";
  html::LineSeries mem{s.memory.empty() ? "memory" : s.memory, "#f28e2b", {}};
  for (const StepPoint& p : s.points)
    if (p.memory_bytes) mem.points.push_back({double(p.step), double(*p.memory_bytes) / 1048576.0});
  if (mem.points.size() < 2) return out;
  m.series.push_back(std::move(mem));
  std::string mcap;
  if (s.creep) {
    const MemoryCreep& k = *s.creep;
    const double y0 = double(k.first_bytes) / 1048576.0;
    m.series.push_back({"trend",
                        "#e15759",
                        {{double(k.from_step), y0},
                         {double(k.to_step),
                          y0 + k.bytes_per_step * double(k.to_step - k.from_step) / 1048576.0}}});
    mcap = fmt::format("Memory creeps: {} per step from step {} (Mann-Kendall z = {:.1f}).",
                       detail::bytes_text(k.bytes_per_step), k.from_step, k.z);
  } else {
    mcap = "No steady growth after the warm-up.";
  }
  out += html::line_chart(m, mcap);
  return out;
}

}  // namespace fathom::html_report
