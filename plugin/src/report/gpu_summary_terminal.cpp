// The GPU section as terminal text: the Tensor Core share, the transfer table with its
// pageable/pinned split, and the busy/idle breakdown. Shared by `fathom report` (inside an epoch)
// and `fathom analyze`.
#include <fathom/gpu_summary.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "aggregate/kernel_classifier.h"
#include "analyze/timeline_analysis.h"
#include "analyze/transfer_analysis.h"
#include "base/bytes_text.h"
#include "base/terminal_text.h"

namespace fathom {
namespace {

using detail::bytes_text;

constexpr const char* kDash = "-";

std::string ms(std::int64_t ns) { return fmt::format("{:.2f} ms", ns / 1e6); }
std::string pct(const std::optional<double>& v) {
  return v ? fmt::format("{:.1f}%", 100 * *v) : kDash;
}
std::string pct_of(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100.0 * part / whole) : kDash;
}

void tensor_cores(std::string& out, const TensorCoreResult& t) {
  auto o = std::back_inserter(out);
  if (t.kernel_count == 0) {
    out += "  Tensor Cores: no compute kernels\n";
    return;
  }
  fmt::format_to(o, "  Tensor Cores: {} of compute-kernel time ({} of {}; {} of {} kernels)\n",
                 pct(t.share), ms(t.tensor_core_ns), ms(t.kernel_ns), t.tensor_core_count,
                 t.kernel_count);
  // How the share was decided: unknown kernels are their own class, not CUDA cores.
  const TensorCoreDecisions& d = t.decisions;
  fmt::format_to(o,
                 "    decided by name: Tensor Cores {}, CUDA cores {}; by op: Tensor Cores {}; "
                 "unknown {} ({}, {} kernel{})\n",
                 ms(d.tensor_cores_by_name.ns), ms(d.cuda_cores_by_name.ns),
                 ms(d.tensor_cores_by_op.ns), ms(d.unknown.ns), pct(t.unknown_share),
                 d.unknown.count, d.unknown.count == 1 ? "" : "s");
  if (!t.phases.empty()) {
    out += "    by phase:";
    for (const auto& p : t.phases) {
      fmt::format_to(o, "  {} {} of {}", p.phase, pct(p.share), ms(p.kernel_ns));
      if (p.unknown_ns > 0) fmt::format_to(o, " ({} unknown)", ms(p.unknown_ns));
    }
    out += "\n";
  }
  out += "    kernel families:";
  for (std::size_t i = 0; i < t.families.size() && i < 6; ++i) {
    const auto& f = t.families[i];
    const std::string unit =
        f.decision == "unknown"
            ? (f.tensor_core_by_op_ns > 0 ? "unknown; TC by op " + ms(f.tensor_core_by_op_ns)
                                          : std::string("unknown"))
        : f.tensor_core ? "TC"
                        : "CUDA cores";
    fmt::format_to(o, "{} {} {} ({})", i ? "," : "", f.family, ms(f.total_ns), unit);
  }
  out += "\n";
  if (!t.ops_recorded) return;
  fmt::format_to(o,
                 "    eligible ops (GEMM, convolution) that ran only on CUDA cores: {} of {} with "
                 "kernels ({})\n",
                 t.eligible_only_cuda_cores, t.eligible_with_kernels, ms(t.eligible_cuda_core_ns));
  for (const auto& e : t.on_cuda_cores)
    fmt::format_to(o, "      {} x{} {} {} {}\n", e.op, e.only_cuda_cores, ms(e.cuda_core_ns),
                   e.shapes, e.dtypes);
  if (t.eligible_unknown_ns > 0)
    fmt::format_to(o, "    kernel time of eligible ops that neither name nor op decided: {}\n",
                   ms(t.eligible_unknown_ns));
  if (!t.misaligned.empty()) {
    out += "    shapes with dims not multiples of 8:\n";
    for (const auto& e : t.misaligned)
      fmt::format_to(o, "      {} x{} ({}) {} {}\n", e.op, e.instances, e.misaligned, e.shapes,
                     e.dtypes);
  }
}

void transfers(std::string& out, const TransferResult& t) {
  auto o = std::back_inserter(out);
  if (t.count == 0) {
    out += "  transfers: none\n";
    return;
  }
  fmt::format_to(o,
                 "  transfers: {} cop{}, {}, {} busy ({} of the window), {} of it while kernels "
                 "ran; link: {}\n",
                 t.count, t.count == 1 ? "y" : "ies", bytes_text(t.bytes), ms(t.busy_ns),
                 pct(t.share_of_window), pct(t.overlap_share),
                 t.link.gb_per_s
                     ? fmt::format("{} ({:.1f} GB/s)", t.link.description, *t.link.gb_per_s)
                     : "peak not known");
  fmt::format_to(o, "    {:<6} {:<9} {:<6} {:>7} {:>11} {:>11} {:>8} {:>7}\n", "dir", "host mem",
                 "call", "count", "bytes", "time", "GB/s", "of peak");
  for (const auto& r : t.rows) {
    fmt::format_to(o, "    {:<6} {:<9} {:<6} {:>7} {:>11} {:>11} {:>8} {:>7}\n",
                   memcpy_kind_name(r.direction), memory_kind_name(r.host_memory),
                   !r.async_known ? "?"
                   : r.async      ? "async"
                                  : "sync",
                   r.count, bytes_text(r.bytes), ms(r.total_ns),
                   r.gb_per_s ? fmt::format("{:.2f}", *r.gb_per_s) : kDash, pct(r.share_of_peak));
  }
  for (const auto& d : t.directions) {
    if (d.direction != MemcpyKind::HostToDevice && d.direction != MemcpyKind::DeviceToHost)
      continue;
    fmt::format_to(o, "    {}: pageable {} ({}), pinned {} ({})\n", memcpy_kind_name(d.direction),
                   bytes_text(d.pageable_bytes), d.pageable_count, bytes_text(d.pinned_bytes),
                   d.pinned_count);
  }
  if (t.pageable_async_count > 0)
    fmt::format_to(o,
                   "    {} asynchronous cop{} from pageable memory: the host waits for {} anyway\n",
                   t.pageable_async_count, t.pageable_async_count == 1 ? "y" : "ies",
                   t.pageable_async_count == 1 ? "it" : "them");
}

void timeline(std::string& out, const TimelineResult& t) {
  auto o = std::back_inserter(out);
  fmt::format_to(o, "  timeline: window {} ({})\n", ms(t.window_ns),
                 t.window_from_steps ? fmt::format("{} step{}", t.steps, t.steps == 1 ? "" : "s")
                                     : "whole recorded span, no steps");
  for (const auto& d : t.devices) {
    fmt::format_to(o,
                   "    device {}: busy {} | idle {}: data wait {}, synchronization {}, late "
                   "launches (host-bound) "
                   "{}, other {} ({} gaps)\n",
                   d.device, pct(d.busy_share), pct_of(d.idle_ns, t.window_ns),
                   pct_of(d.idle.data_wait_ns, t.window_ns), pct_of(d.idle.sync_ns, t.window_ns),
                   pct_of(d.idle.host_launch_ns, t.window_ns), pct_of(d.idle.other_ns, t.window_ns),
                   d.idle.gaps);
  }
  fmt::format_to(o,
                 "    kernels {}, tiny (<10 us): {} of them, {} of kernel time; launch calls {}, "
                 "host syncs {} ({})\n",
                 t.kernel_count, pct(t.tiny_count_share), pct(t.tiny_time_share), t.launch_calls,
                 host_syncs(t).count, ms(host_syncs(t).ns));
  if (t.communication_kernels > 0) {
    for (const auto& d : t.devices)
      fmt::format_to(o,
                     "    communication (NCCL) on device {}: {} ({} of the window), {} overlapped "
                     "with compute\n",
                     d.device, ms(d.communication_ns), pct_of(d.communication_ns, t.window_ns),
                     pct(d.communication_overlap_share));
  }
}

void copies_by_phase(std::string& out, const TransferResult& t) {
  if (t.phases.empty()) return;
  out += "    copies by phase:";
  for (const PhaseTransfers& p : t.phases)
    fmt::format_to(std::back_inserter(out), "  {} {} ({}, {})", p.phase, p.count,
                   bytes_text(p.bytes), ms(p.total_ns));
  out += "\n";
}

// The steps one by one: the first rows, then the slowest (where a regression shows).
constexpr std::size_t kStepRowsShown = 12;

void steps(std::string& out, const GpuSummary& s) {
  if (s.steps.empty()) return;
  auto o = std::back_inserter(out);
  fmt::format_to(o, "  per step ({} step{}; GPU work by the step that launched it):\n",
                 s.steps.size() + s.steps_not_listed, s.steps.size() == 1 ? "" : "s");
  fmt::format_to(o, "    {:<22} {:>10} {:>9} {:>8} {:>11} {:>7} {:>10}\n", "step", "wall",
                 "GPU busy", "kernels", "compute", "TC", "copies");
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < s.steps.size(); ++i) rows.push_back(i);
  if (rows.size() > kStepRowsShown) {
    std::vector<std::size_t> slow(rows.begin() + kStepRowsShown / 2, rows.end());
    std::partial_sort(
        slow.begin(), slow.begin() + kStepRowsShown / 2, slow.end(),
        [&](std::size_t a, std::size_t b) { return s.steps[a].wall_ns > s.steps[b].wall_ns; });
    slow.resize(kStepRowsShown / 2);
    std::sort(slow.begin(), slow.end());
    rows.resize(kStepRowsShown / 2);
    rows.insert(rows.end(), slow.begin(), slow.end());
  }
  std::size_t last = 0;
  for (std::size_t i : rows) {
    if (i > last + 1 && last != 0) fmt::format_to(o, "    ... (the slowest of the rest follow)\n");
    const StepGpu& g = s.steps[i];
    fmt::format_to(o, "    {:<22} {:>10} {:>9} {:>8} {:>11} {:>7} {:>10}\n",
                   g.name.size() > 22 ? g.name.substr(0, 21) + "~" : g.name, ms(g.wall_ns),
                   pct(g.busy_share), g.kernel_count, ms(g.kernel_ns), pct(g.tensor_core_share),
                   bytes_text(g.memcpy_bytes));
    last = i;
  }
  if (s.steps_not_listed > 0)
    fmt::format_to(o, "    {} more steps past the table's limit (in the totals only)\n",
                   s.steps_not_listed);
}

}  // namespace

std::string format_gpu_summary_text(const GpuSummary& s) {
  std::string out;
  auto o = std::back_inserter(out);
  out += "  GPU";
  if (!s.source.empty()) fmt::format_to(o, " ({})", s.source);
  for (const auto& d : s.devices)
    fmt::format_to(o, " | device {}: {} sm_{}{}", d.id, d.name, d.compute_major, d.compute_minor);
  out += "\n";
  if (!s.gpu_activity) {
    out += "  no GPU activity: the records hold no kernel, copy or memset\n";
  } else {
    tensor_cores(out, s.tensor_cores);
    transfers(out, s.transfers);
    copies_by_phase(out, s.transfers);
    timeline(out, s.timeline);
    steps(out, s);
  }
  if (s.dropped_records > 0)
    fmt::format_to(o, "  dropped records: {} of {} (the totals above are lower bounds)\n",
                   s.dropped_records, s.records + s.dropped_records);
  for (const Unmeasured& u : s.not_measured)
    fmt::format_to(o, "  not measured: {}: {}\n", u.what, u.why);
  return detail::terminal_safe(out);
}

}  // namespace fathom
