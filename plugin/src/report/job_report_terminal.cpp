// The job report in the terminal: one epoch, the ranks side by side, the cross-rank findings.
#include <fathom/job_report.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "advise/job_findings.h"
#include "base/bytes_text.h"
#include "base/terminal_text.h"

namespace fathom {
namespace {

using detail::bytes_text;

constexpr std::size_t kMaxRows = 16;  // more ranks: the slowest kMaxRows/2 and fastest kMaxRows/2

std::string memory_text(const RankSummary& s) {
  if (s.device_peak_allocated_bytes) return bytes_text(*s.device_peak_allocated_bytes);
  if (s.peak_rss_bytes) return bytes_text(*s.peak_rss_bytes) + " rss";
  return "-";
}

void row(std::string& out, const RankSummary& s, const JobEpoch& e) {
  const bool comm = s.comm.source != CommSource::None;
  const std::string busy = comm ? fmt::format("{:.2f}", s.per_step(s.comm.busy_ms)) : "-";
  const std::string exposed = comm ? fmt::format("{:.2f}", s.comm_exposed_ms_mean()) : "-";
  const std::string overlap =
      comm && s.comm.busy_ms > 0
          ? fmt::format("{:.0f}%",
                        100.0 * (1.0 - std::min(1.0, s.comm.exposed_ms / s.comm.busy_ms)))
          : "-";
  const char* mark = e.slowest_rank == s.rank.rank && e.ranks.size() > 1 ? " <- slowest" : "";
  fmt::format_to(std::back_inserter(out),
                 "  {:>5} {:<16.16} {:>6} {:>9.2f} {:>9.2f} {:>8.2f} {:>9} {:>9} {:>8} {:>11}{}\n",
                 s.rank.rank, s.host, s.steps, s.step_ms_mean(), s.work_ms(), s.data_ms_mean(),
                 busy, exposed, overlap, memory_text(s), mark);
}

template <typename... T>
void append(std::string& out, fmt::format_string<T...> f, T&&... args) {
  fmt::format_to(std::back_inserter(out), f, std::forward<T>(args)...);
}

}  // namespace

std::string format_job_terminal(const JobReport& report, int epoch) {
  std::string out;
  if (report.epochs.empty()) return "fathom job report: no epoch merged yet\n";
  const std::size_t i = epoch < 0
                            ? report.epochs.size() - 1
                            : std::min(static_cast<std::size_t>(epoch), report.epochs.size() - 1);
  const JobEpoch& e = report.epochs[i];
  append(out, "fathom job report: {} - epoch {} - {} of {} ranks reported\n", report.run_name,
         e.index, e.ranks.size(), e.world_size);
  if (!e.missing_ranks.empty()) {
    std::string list;
    for (std::size_t k = 0; k < e.missing_ranks.size() && k < 32; ++k)
      list += fmt::format("{}{}", k ? ", " : "", e.missing_ranks[k]);
    if (e.missing_ranks.size() > 32)
      list += fmt::format(" and {} more", e.missing_ranks.size() - 32);
    append(out, "  missing ranks: {} (rank 0 waited {:.0f} ms)\n", list, e.waited_ms);
  }
  if (e.slowest_rank && e.fastest_rank) {
    append(out,
           "  slowest rank {}: {:.2f} ms work/step; fastest rank {}: {:.2f} ms; median {:.2f} ms; "
           "skew {:.2f} ms ({:+.1f}%)\n",
           *e.slowest_rank, e.work_ms_slowest, *e.fastest_rank, e.work_ms_fastest, e.work_ms_median,
           e.skew_ms, 100.0 * e.skew_share);
    append(out, "  work = {}\n", work_basis(e));
  }
  append(out, "\n  {:>5} {:<16} {:>6} {:>9} {:>9} {:>8} {:>9} {:>9} {:>8} {:>11}\n", "rank", "host",
         "steps", "step ms", "work ms", "data ms", "comm ms", "waited ms", "overlap", "peak mem");
  if (e.ranks.size() <= kMaxRows) {
    for (const RankSummary& s : e.ranks) row(out, s, e);
  } else {
    std::vector<const RankSummary*> by_work;
    for (const RankSummary& s : e.ranks) by_work.push_back(&s);
    std::sort(by_work.begin(), by_work.end(),
              [](auto* a, auto* b) { return a->work_ms() > b->work_ms(); });
    for (std::size_t k = 0; k < kMaxRows / 2; ++k) row(out, *by_work[k], e);
    append(out, "  {:>5} ... {} ranks not shown (all in the JSON report)\n", "",
           e.ranks.size() - kMaxRows);
    for (std::size_t k = by_work.size() - kMaxRows / 2; k < by_work.size(); ++k)
      row(out, *by_work[k], e);
  }
  if (e.findings.empty()) {
    append(out, "\n  no cross-rank findings\n");
  } else {
    append(out, "\n");
    for (const Finding& f : e.findings) {
      append(out, "  [{}] {}\n", severity_name(f.severity), f.title);
      for (const Evidence& ev : f.evidence) append(out, "      {}: {}\n", ev.name, ev.value);
      if (!f.estimated_gain.empty()) append(out, "      gain: {}\n", f.estimated_gain);
    }
  }
  return detail::terminal_safe(out);
}

}  // namespace fathom
