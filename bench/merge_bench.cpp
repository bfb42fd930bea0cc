// Rank 0's side of the job report at scale: 1,000 simulated ranks' serialized summaries parsed,
// merged, searched for cross-rank findings and written as JSON and terminal text. Prints each
// part's time; the budget is one second for the whole (issue 8), so the ratio to it is printed too.
// Usage: merge_bench [ranks=1000] [repeats=20]
#include <fathom/job_merge.h>
#include <fathom/job_report.h>
#include <fathom/rank_summary.h>
#include <fathom/report_writers.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "formats/rank_summary_bytes.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// A synchronous data-parallel epoch: work varies a little per rank, one rank in a hundred is
// slow, and every rank waits for the slowest in its all-reduce.
std::vector<std::vector<std::uint8_t>> simulate(int world, std::mt19937& rng) {
  std::normal_distribution<double> noise(0.0, 0.3);
  std::vector<double> work(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r)
    work[static_cast<std::size_t>(r)] = 20.0 + noise(rng) + (r % 100 == 37 ? 8.0 : 0.0);
  const double slowest = *std::max_element(work.begin(), work.end());
  std::vector<std::vector<std::uint8_t>> out;
  for (int r = 0; r < world; ++r) {
    const double w = work[static_cast<std::size_t>(r)];
    const double wait = 1.0 + slowest - w;
    fathom::RankSummary s;
    s.rank = {r, r % 8, world};
    s.host = "gpu-node-" + std::to_string(r / 8) + ".cluster.example";
    s.pid = 10000 + r;
    s.steps = 500;
    s.samples = 500 * 64;
    s.step_ms_total = 500 * (w + wait);
    s.step_ms_max = w + wait + 3.0;
    s.wall_ms = s.step_ms_total * 1.02;
    s.phase_ms = {500 * 0.4, 500 * 0.2, 500 * w * 0.35, 500 * (w * 0.5 + wait), 500 * w * 0.15};
    s.comm = {fathom::CommSource::Gpu, 500 * 12, 500LL * 12 * (25 << 20), 500 * (wait + 4.0),
              500 * wait};
    s.device_peak_allocated_bytes = 60LL << 30;
    s.device_peak_reserved_bytes = 70LL << 30;
    s.top_findings = {{"communication.exposed", fathom::Severity::Warning},
                      {"data.loader_bound", fathom::Severity::Info}};
    out.push_back(fathom::serialize_rank_summary(s));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int world = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 20;
  if (world < 2 || repeats < 1) {
    std::fprintf(stderr, "usage: merge_bench [ranks>=2] [repeats>=1]\n");
    return 2;
  }
  std::mt19937 rng(42);
  const auto payloads = simulate(world, rng);
  std::size_t bytes = 0, largest = 0;
  for (const auto& p : payloads) {
    bytes += p.size();
    largest = std::max(largest, p.size());
  }

  double first_ms = 0;
  double parse_ms = 1e300, merge_ms = 1e300, json_ms = 1e300, text_ms = 1e300, total_ms = 1e300;
  std::size_t json_bytes = 0, findings = 0;
  int slowest = -1;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto t0 = Clock::now();
    std::vector<fathom::RankSummary> summaries;
    summaries.reserve(payloads.size());
    for (const auto& p : payloads) summaries.push_back(fathom::parse_rank_summary(p));
    const double t_parse = ms_since(t0);
    const auto t1 = Clock::now();
    fathom::JobReport report;
    report.run_name = "bench";
    report.world_size = world;
    report.epochs.push_back(fathom::merge_rank_summaries(0, world, std::move(summaries)));
    const double t_merge = ms_since(t1);
    const auto t2 = Clock::now();
    const std::string json = fathom::format_job_json(report);
    const double t_json = ms_since(t2);
    const auto t3 = Clock::now();
    const std::string text = fathom::format_job_terminal(report);
    const double t_text = ms_since(t3);
    parse_ms = std::min(parse_ms, t_parse);
    merge_ms = std::min(merge_ms, t_merge);
    json_ms = std::min(json_ms, t_json);
    text_ms = std::min(text_ms, t_text);
    if (rep == 0) first_ms = ms_since(t0);
    total_ms = std::min(total_ms, ms_since(t0));
    json_bytes = json.size();
    findings = report.epochs[0].findings.size();
    slowest = report.epochs[0].slowest_rank.value_or(-1);
  }

  std::printf("merge_bench: %d ranks, best of %d\n", world, repeats);
  std::printf(
      "  rank summary: %zu bytes largest here, %zu bytes at most (kMaxRankSummaryBytes); "
      "%.1f KiB from all ranks\n",
      largest, fathom::kMaxRankSummaryBytes, bytes / 1024.0);
  std::printf("  parse    %9.3f ms\n", parse_ms);
  std::printf("  merge    %9.3f ms  (slowest rank %d, %zu cross-rank findings)\n", merge_ms,
              slowest, findings);
  std::printf("  json     %9.3f ms  (%.1f KiB)\n", json_ms, json_bytes / 1024.0);
  std::printf("  terminal %9.3f ms\n", text_ms);
  std::printf("  total    %9.3f ms  = %.4f of the 1 s budget (first, cold run: %.3f ms)\n",
              total_ms, total_ms / 1000.0, first_ms);
  return 0;
}
