#include <fathom/report_writers.h>

#include <fmt/format.h>

#include <iterator>

namespace fathom {
namespace {

std::string bytes_text(std::int64_t b) {
  if (b >= (1LL << 30)) return fmt::format("{:.2f} GiB", b / 1073741824.0);
  if (b >= (1LL << 20)) return fmt::format("{:.1f} MiB", b / 1048576.0);
  if (b >= (1LL << 10)) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", b);
}

constexpr const char* kDash = "-";

void phase_table(std::string& out, const EpochSummary& e) {
  const double step_ms = e.step_ms_mean();
  fmt::format_to(std::back_inserter(out), "  {:<10} {:>6} {:>10} {:>7} {:>10} {:>11} {:>11} {:>10}\n",
                 "phase", "count", "ms/step", "share", "device ms", "peak alloc", "peak resv",
                 "rss max");
  bool any_inferred = false;
  for (const PhaseSummary& p : e.phases) {
    if (p.count == 0) continue;
    any_inferred = any_inferred || p.inferred;
    const double per_step = e.steps ? p.wall_ms_total / e.steps : 0.0;
    const std::string share = step_ms > 0 ? fmt::format("{:.1f}%", 100.0 * per_step / step_ms) : kDash;
    const std::string device =
        p.device_ms_total ? fmt::format("{:.2f}", *p.device_ms_total / std::max<std::int64_t>(e.steps, 1)) : kDash;
    const std::string alloc = p.device_memory ? bytes_text(p.device_memory->peak_allocated_bytes) : kDash;
    const std::string resv = p.device_memory ? bytes_text(p.device_memory->peak_reserved_bytes) : kDash;
    const std::string rss = p.rss_bytes_max ? bytes_text(*p.rss_bytes_max) : kDash;
    std::string name = std::string(phase_name(p.phase)) + (p.inferred ? "*" : "");
    if (p.aborted) name += fmt::format(" ({} aborted)", p.aborted);
    fmt::format_to(std::back_inserter(out), "  {:<10} {:>6} {:>10.2f} {:>7} {:>10} {:>11} {:>11} {:>10}\n",
                   name, p.count, per_step, share, device, alloc, resv, rss);
  }
  if (any_inferred)
    out += "  * data: the time between one step's end and the next step's start (the loader)\n";
}

void copy_table(std::string& out, const EpochSummary& e) {
  if (e.copies.empty()) return;
  fmt::format_to(std::back_inserter(out), "\n  {:<16} {:>6} {:>11} {:>8} {:>6} {:>9}\n", "copies",
                 "count", "bytes", "memory", "async", "host ms");
  for (const CopySummary& c : e.copies) {
    fmt::format_to(std::back_inserter(out), "  {:<16} {:>6} {:>11} {:>8} {:>6} {:>9.2f}\n",
                   copy_direction_name(c.direction), c.count, bytes_text(c.bytes),
                   c.pinned ? "pinned" : "pageable", c.non_blocking ? "yes" : "no", c.wall_ms_total);
  }
}

void findings(std::string& out, const EpochSummary& e) {
  if (e.findings.empty()) {
    out += "\n  findings: none above the thresholds\n";
    return;
  }
  fmt::format_to(std::back_inserter(out), "\n  findings ({})\n", e.findings.size());
  for (const Finding& f : e.findings) {
    fmt::format_to(std::back_inserter(out), "  [{}] {}{}\n", severity_name(f.severity), f.title,
                   f.applied ? " (applied by fathom)" : "");
    for (const Evidence& ev : f.evidence)
      fmt::format_to(std::back_inserter(out), "      {}: {}\n", ev.name, ev.value);
    if (!f.estimated_gain.empty())
      fmt::format_to(std::back_inserter(out), "      gain: {}\n", f.estimated_gain);
    if (!f.fix.empty()) {
      out += "      fix:\n";
      std::size_t start = 0;
      while (start <= f.fix.size()) {
        std::size_t nl = f.fix.find('\n', start);
        if (nl == std::string::npos) nl = f.fix.size();
        fmt::format_to(std::back_inserter(out), "        {}\n", f.fix.substr(start, nl - start));
        start = nl + 1;
      }
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
                 "{:.2f} ms mean, {:.2f} ms max{}\n\n",
                 e.steps, e.failed_steps, e.samples, e.wall_ms / 1000.0, e.samples_per_second(),
                 e.step_ms_mean(), e.step_ms_max, e.ended_by_exception ? " | ENDED BY EXCEPTION" : "");
  phase_table(out, e);
  copy_table(out, e);
  out += "\n";
  if (e.device_memory) {
    fmt::format_to(std::back_inserter(out),
                   "  device memory: peak allocated {}, peak reserved {}, {} allocator retries, {} "
                   "out-of-memory errors\n",
                   bytes_text(e.device_memory->peak_allocated_bytes),
                   bytes_text(e.device_memory->peak_reserved_bytes), e.device_memory->alloc_retries,
                   e.device_memory->ooms);
  }
  if (e.peak_rss_bytes)
    fmt::format_to(std::back_inserter(out), "  process peak resident memory: {}\n",
                   bytes_text(*e.peak_rss_bytes));
  for (const Unmeasured& u : env.not_measured)
    fmt::format_to(std::back_inserter(out), "  not measured: {}: {}\n", u.what, u.why);
  findings(out, e);
  return out;
}

}  // namespace fathom
