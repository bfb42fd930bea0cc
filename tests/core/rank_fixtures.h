#pragma once
// Rank summaries for the job-report tests: a data-parallel epoch where every rank runs the same
// steps and waits for the slowest one in its all-reduce.
#include <fathom/rank_summary.h>

namespace fathom::testing {

// A rank that worked work_ms and waited wait_ms in communication per step, over 10 steps.
inline RankSummary rank_summary(int rank, int world, double work_ms, double wait_ms = 0.0,
                                double data_ms = 1.0, std::int64_t samples_per_step = 32) {
  RankSummary s;
  s.rank = {rank, rank % 8, world};
  s.epoch = 0;
  s.host = "node" + std::to_string(rank / 8);
  s.pid = 1000 + rank;
  s.steps = 10;
  s.samples = 10 * samples_per_step;
  s.step_ms_total = 10 * (work_ms + wait_ms);
  s.step_ms_max = work_ms + wait_ms + 1.0;
  s.wall_ms = s.step_ms_total + 10 * data_ms;
  s.phase_ms[static_cast<std::size_t>(Phase::Data)] = 10 * data_ms;
  s.phase_ms[static_cast<std::size_t>(Phase::Forward)] = 10 * work_ms * 0.4;
  s.phase_ms[static_cast<std::size_t>(Phase::Backward)] = 10 * (work_ms * 0.5 + wait_ms);
  s.phase_ms[static_cast<std::size_t>(Phase::Optimizer)] = 10 * work_ms * 0.1;
  s.comm.source = CommSource::Host;
  s.comm.collectives = 40;
  s.comm.bytes = 40 << 20;
  s.comm.busy_ms = 10 * (wait_ms + 2.0);
  s.comm.exposed_ms = 10 * wait_ms;
  s.peak_rss_bytes = 512LL << 20;
  return s;
}

// A synchronous job: each rank waits base_wait plus the slowest rank's extra work.
inline std::vector<RankSummary> synchronous_job(const std::vector<double>& work_ms,
                                                double base_wait = 0.5) {
  double slowest = 0;
  for (double w : work_ms) slowest = std::max(slowest, w);
  std::vector<RankSummary> out;
  const int world = static_cast<int>(work_ms.size());
  for (int r = 0; r < world; ++r)
    out.push_back(rank_summary(r, world, work_ms[r], base_wait + slowest - work_ms[r]));
  return out;
}

}  // namespace fathom::testing
