// A rank's epoch as it travels to rank 0 (fathom/rank_summary.h).
#include "analyze/summarize_rank.h"

#include <algorithm>

namespace fathom {
namespace {

int severity_rank(Severity s) { return static_cast<int>(s); }

}  // namespace

RankSummary summarize_rank(const EpochSummary& epoch, const RankInfo& rank, const CommStats& comm,
                           const std::string& host, std::int64_t pid,
                           std::optional<double> work_ms_median) {
  RankSummary s;
  s.work_ms_median = work_ms_median;
  s.rank = rank;
  s.epoch = epoch.index;
  s.host = host.substr(0, kRankSummaryHostBytes);
  s.pid = pid;
  s.steps = epoch.steps;
  s.failed_steps = epoch.failed_steps;
  s.samples = epoch.samples;
  s.wall_ms = epoch.wall_ms;
  s.step_ms_total = epoch.step_ms_total;
  s.step_ms_max = epoch.step_ms_max;
  for (Phase p : kAllPhases) s.phase_ms[static_cast<std::size_t>(p)] = epoch.phase(p).wall_ms_total;
  s.comm = comm;
  // NCCL runs on the GPU: its kernels (CUPTI) are the measurement; a host clock around an NCCL
  // collective only sees the launch.
  if (epoch.gpu && epoch.gpu->timeline.communication_kernels > 0) {
    const TimelineResult& t = epoch.gpu->timeline;
    double busy_ns = 0, exposed_ns = 0;
    for (const DeviceTimeline& d : t.devices) {
      busy_ns += static_cast<double>(d.communication_ns);
      exposed_ns += static_cast<double>(d.communication_ns - d.communication_overlap_ns);
    }
    s.comm.source = CommSource::Gpu;
    s.comm.collectives = t.communication_kernels;
    s.comm.busy_ms = busy_ns / 1e6;
    s.comm.exposed_ms = exposed_ns / 1e6;
  }
  if (epoch.device_memory) {
    s.device_peak_allocated_bytes = epoch.device_memory->peak_allocated_bytes;
    s.device_peak_reserved_bytes = epoch.device_memory->peak_reserved_bytes;
  }
  s.peak_rss_bytes = epoch.peak_rss_bytes;
  s.ended_by_exception = epoch.ended_by_exception;
  std::vector<const Finding*> order;
  for (const Finding& f : epoch.findings) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(), [](const Finding* a, const Finding* b) {
    return severity_rank(a->severity) > severity_rank(b->severity);
  });
  for (std::size_t i = 0; i < order.size() && i < kRankSummaryTopFindings; ++i)
    s.top_findings.push_back(
        {order[i]->id.substr(0, kRankSummaryFindingIdBytes), order[i]->severity});
  return s;
}

}  // namespace fathom
