#include <fathom/error.h>
#include <fathom/report_diff.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include "base/bytes_text.h"
#include "base/terminal_text.h"

namespace fathom {
namespace {

const EpochSummary& pick(const RunReport& r, int epoch, const char* which) {
  if (r.epochs.empty())
    throw Error(
        fmt::format("report {} ({}) holds no ended epoch: nothing to compare", which, r.run_name));
  if (epoch < 0) return r.epochs.back();
  for (const EpochSummary& e : r.epochs)
    if (e.index == epoch) return e;
  throw Error(fmt::format("report {} ({}) has no epoch {}; it has epochs {} to {}", which,
                          r.run_name, epoch, r.epochs.front().index, r.epochs.back().index));
}

std::optional<double> opt(double v) { return v; }
template <typename T>
std::optional<double> opt(const std::optional<T>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

std::string value_text(double v, const std::string& unit) {
  if (unit == "bytes") {
    return detail::bytes_text(v);
  }
  if (unit == "count") return fmt::format("{:.0f}", v);
  if (unit == "ms" || unit == "s" || unit == "J" || unit == "us")
    return fmt::format("{:.2f} {}", v, unit);
  if (unit == "%") return fmt::format("{:.1f} %", v);
  if (unit == "samples/s") return fmt::format("{:.1f}/s", v);
  return fmt::format("{:.0f} {}", v, unit);
}

}  // namespace

std::optional<double> MetricChange::delta() const {
  if (!a || !b) return std::nullopt;
  return *b - *a;
}

std::optional<double> MetricChange::relative() const {
  if (!a || !b || *a == 0) return std::nullopt;
  return (*b - *a) / std::fabs(*a);
}

int MetricChange::verdict(double noise) const {
  if (!judged) return 0;
  const auto d = delta();
  if (!d || *d == 0) return 0;
  // Below a hundredth of a millisecond a change is clock noise, whatever its relative size.
  if (unit == "ms" && std::fabs(*d) < 0.01) return 0;
  const auto r = relative();
  if (r && std::fabs(*r) < noise) return 0;
  const bool lower = *d < 0;
  return lower == lower_is_better ? 1 : -1;
}

ReportDiff diff_reports(const RunReport& ra, const RunReport& rb, int epoch_a, int epoch_b) {
  const EpochSummary& a = pick(ra, epoch_a, "A");
  const EpochSummary& b = pick(rb, epoch_b, "B");
  ReportDiff d;
  d.name_a = ra.run_name;
  d.name_b = rb.run_name;
  d.epoch_a = a.index;
  d.epoch_b = b.index;

  auto env_change = [&](const char* what, const std::string& x, const std::string& y) {
    if (x != y) d.environment_changes.push_back(fmt::format("{}: {} -> {}", what, x, y));
  };
  const Environment& ea = ra.environment;
  const Environment& eb = rb.environment;
  env_change("device", ea.device, eb.device);
  env_change("device name", ea.device_name, eb.device_name);
  env_change("torch", ea.torch_version, eb.torch_version);
  env_change("fathom", ea.fathom_version, eb.fathom_version);
  env_change("mode", std::string(ea.mode_text()), std::string(eb.mode_text()));
  env_change("host", ea.hostname, eb.hostname);
  if (a.steps && b.steps && a.samples && b.samples && a.samples / a.steps != b.samples / b.steps)
    d.environment_changes.push_back(
        fmt::format("samples per step: {} -> {}", a.samples / a.steps, b.samples / b.steps));

  auto add = [&](const char* section, std::string name, const char* unit, std::optional<double> x,
                 std::optional<double> y, bool lower_is_better = true) {
    if (!x && !y) return;
    d.metrics.push_back({section, std::move(name), unit, x, y, lower_is_better});
  };
  add("step", "step time, mean", "ms", opt(a.step_ms_mean()), opt(b.step_ms_mean()));
  add("step", "step time, max", "ms", opt(a.step_ms_max), opt(b.step_ms_max));
  add("step", "throughput", "samples/s", opt(a.samples_per_second()), opt(b.samples_per_second()),
      false);
  add("step", "epoch wall time", "s", opt(a.wall_ms / 1000), opt(b.wall_ms / 1000));
  add("step", "failed steps", "count", opt(static_cast<double>(a.failed_steps)),
      opt(static_cast<double>(b.failed_steps)));

  for (Phase p : kAllPhases) {
    const PhaseSummary& pa = a.phase(p);
    const PhaseSummary& pb = b.phase(p);
    auto per_step = [](const PhaseSummary& s, const EpochSummary& e) -> std::optional<double> {
      if (s.count == 0 || e.steps == 0) return std::nullopt;
      return s.wall_ms_total / e.steps;
    };
    auto device_per_step = [](const PhaseSummary& s,
                              const EpochSummary& e) -> std::optional<double> {
      if (!s.device_ms_total || e.steps == 0) return std::nullopt;
      return *s.device_ms_total / e.steps;
    };
    const std::string name(phase_name(p));
    add("phase", name + " per step", "ms", per_step(pa, a), per_step(pb, b));
    add("phase", name + " device time per step", "ms", device_per_step(pa, a),
        device_per_step(pb, b));
  }

  auto mem = [](const EpochSummary& e, std::int64_t DeviceMemoryPeak::*f) -> std::optional<double> {
    if (!e.device_memory) return std::nullopt;
    return static_cast<double>((*e.device_memory).*f);
  };
  add("memory", "device peak allocated", "bytes", mem(a, &DeviceMemoryPeak::peak_allocated_bytes),
      mem(b, &DeviceMemoryPeak::peak_allocated_bytes));
  add("memory", "device peak reserved", "bytes", mem(a, &DeviceMemoryPeak::peak_reserved_bytes),
      mem(b, &DeviceMemoryPeak::peak_reserved_bytes));
  add("memory", "allocator retries", "count", mem(a, &DeviceMemoryPeak::alloc_retries),
      mem(b, &DeviceMemoryPeak::alloc_retries));
  add("memory", "out-of-memory errors", "count", mem(a, &DeviceMemoryPeak::ooms),
      mem(b, &DeviceMemoryPeak::ooms));
  add("memory", "process peak resident", "bytes", opt(a.peak_rss_bytes), opt(b.peak_rss_bytes));
  auto activations = [](const EpochSummary& e) -> std::optional<double> {
    if (!e.footprint || !e.footprint->activation_bytes) return std::nullopt;
    return static_cast<double>(*e.footprint->activation_bytes);
  };
  add("memory", "activations", "bytes", activations(a), activations(b));
  auto optimizer_state = [](const EpochSummary& e) -> std::optional<double> {
    if (!e.footprint || !e.footprint->optimizer_state_bytes) return std::nullopt;
    return static_cast<double>(*e.footprint->optimizer_state_bytes);
  };
  add("memory", "optimizer state", "bytes", optimizer_state(a), optimizer_state(b));

  auto copy_bytes = [](const EpochSummary& e, CopyDirection dir) -> std::optional<double> {
    if (e.steps == 0) return std::nullopt;
    std::int64_t bytes = 0;
    bool any = false;
    for (const CopySummary& c : e.copies)
      if (c.direction == dir) bytes += c.bytes, any = true;
    return any ? std::optional<double>(static_cast<double>(bytes) / e.steps) : std::nullopt;
  };
  add("copies", "host-to-device bytes per step", "bytes",
      copy_bytes(a, CopyDirection::HostToDevice), copy_bytes(b, CopyDirection::HostToDevice));
  add("copies", "device-to-host bytes per step", "bytes",
      copy_bytes(a, CopyDirection::DeviceToHost), copy_bytes(b, CopyDirection::DeviceToHost));

  auto tel = [](const EpochSummary& e,
                std::optional<double> DeviceTelemetry::*f) -> std::optional<double> {
    if (!e.telemetry) return std::nullopt;
    return (*e.telemetry).*f;
  };
  add("device", "GPU busy (NVML), mean", "%", tel(a, &DeviceTelemetry::gpu_utilization_pct_mean),
      tel(b, &DeviceTelemetry::gpu_utilization_pct_mean), false);
  add("device", "power, mean", "W", tel(a, &DeviceTelemetry::power_w_mean),
      tel(b, &DeviceTelemetry::power_w_mean));
  add("device", "SM clock, mean", "MHz", tel(a, &DeviceTelemetry::sm_clock_mhz_mean),
      tel(b, &DeviceTelemetry::sm_clock_mhz_mean), false);
  auto energy_per_sample = [](const EpochSummary& e) -> std::optional<double> {
    if (!e.telemetry || !e.telemetry->energy_j || e.samples == 0) return std::nullopt;
    return *e.telemetry->energy_j / static_cast<double>(e.samples);
  };
  add("device", "energy per sample", "J", energy_per_sample(a), energy_per_sample(b));

  if (a.gpu && b.gpu)
    for (MetricChange& m : diff_gpu_summaries(*a.gpu, *b.gpu)) d.metrics.push_back(std::move(m));
  d.findings = diff_findings(a.findings, b.findings);
  return d;
}

std::string format_diff(const ReportDiff& d, double noise) {
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(it, "fathom diff | A: {} (epoch {}) -> B: {} (epoch {})\n", d.name_a, d.epoch_a,
                 d.name_b, d.epoch_b);
  int better = 0, worse = 0, same = 0;
  for (const MetricChange& m : d.metrics) {
    if (!m.a || !m.b || !m.judged) continue;
    const int v = m.verdict(noise);
    (v > 0 ? better : v < 0 ? worse : same) += 1;
  }
  for (const MetricChange& m : d.metrics) {
    if (m.name != "step time, mean" && m.name != "throughput") continue;
    if (const auto r = m.relative())
      fmt::format_to(it, "  {}: {:+.1f} % ({})\n", m.name, 100 * *r,
                     m.verdict(noise) > 0   ? "better"
                     : m.verdict(noise) < 0 ? "worse"
                                            : "unchanged");
  }
  fmt::format_to(it, "  {} better, {} worse, {} within {:.0f} %\n", better, worse, same,
                 100 * noise);
  if (!d.environment_changes.empty()) {
    out += "\nenvironment\n";
    for (const std::string& c : d.environment_changes) fmt::format_to(it, "  {}\n", c);
  }
  std::string section;
  for (const MetricChange& m : d.metrics) {
    if (m.section != section) {
      section = m.section;
      fmt::format_to(it, "\n{:<34} {:>14} {:>14} {:>10}\n", section, "A", "B", "change");
    }
    const std::string va = m.a ? value_text(*m.a, m.unit) : "-";
    const std::string vb = m.b ? value_text(*m.b, m.unit) : "-";
    std::string change;
    if (const auto r = m.relative())
      change = fmt::format("{:+.1f} %", 100 * *r);
    else if (!m.a)
      change = "new";
    else if (!m.b)
      change = "gone";
    else
      change = m.delta() && *m.delta() != 0 ? value_text(*m.delta(), m.unit) : "0";
    const int v = m.verdict(noise);
    const char* mark = !m.a || !m.b || !m.judged ? ""
                       : v > 0                   ? "  better"
                       : v < 0                   ? "  worse"
                                                 : "  ~";
    fmt::format_to(it, "  {:<32} {:>14} {:>14} {:>10}{}\n", m.name, va, vb, change, mark);
  }
  out += "\nfindings\n";
  if (d.findings.empty()) out += "  no finding appeared or disappeared\n";
  for (const FindingChange& f : d.findings) {
    switch (f.kind) {
      case FindingChange::Kind::Appeared:
        fmt::format_to(it, "  + appeared  [{}] {}  ({})\n", severity_name(f.severity_b), f.title,
                       f.id);
        break;
      case FindingChange::Kind::Disappeared:
        fmt::format_to(it, "  - gone      [{}] {}  ({})\n", severity_name(f.severity_a), f.title,
                       f.id);
        break;
      case FindingChange::Kind::SeverityChanged:
        fmt::format_to(it, "  * severity  {} -> {}: {}  ({})\n", severity_name(f.severity_a),
                       severity_name(f.severity_b), f.title, f.id);
        break;
    }
  }
  return detail::terminal_safe(out);
}

}  // namespace fathom
