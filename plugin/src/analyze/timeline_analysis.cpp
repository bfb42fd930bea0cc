#include "analyze/timeline_analysis.h"

#include "aggregate/gpu_aggregator.h"

namespace fathom {
namespace {

std::optional<double> ratio(std::int64_t part, std::int64_t whole) {
  if (whole <= 0) return std::nullopt;
  return static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

TimelineResult analyze_timeline(const GpuAggregate& a) {
  TimelineResult r;
  r.window_ns = a.window_ns();
  r.window_from_steps = a.window_from_steps;
  r.steps = a.steps;
  r.late_records = a.late_records;

  std::int64_t kernel_time = 0;
  for (const KernelStats& k : a.kernels) {
    r.kernel_count += k.count;
    kernel_time += k.total_ns;
    r.tiny_kernel_count += k.tiny_count;
    r.tiny_kernel_ns += k.tiny_ns;
    if (k.kind.communication) {
      r.communication_kernels += k.count;
      r.communication_ns += k.total_ns;
    }
  }
  r.tiny_count_share = ratio(r.tiny_kernel_count, r.kernel_count);
  r.tiny_time_share = ratio(r.tiny_kernel_ns, kernel_time);

  std::int64_t communication_union = 0;
  for (const DeviceTimelineStats& t : a.timelines) {
    DeviceTimeline d;
    d.device = t.device;
    d.busy_ns = t.busy_ns;
    d.idle_ns = t.idle_ns;
    d.busy_share = ratio(t.busy_ns, r.window_ns);
    d.idle = t.idle;
    d.kernel_ns = t.kernel_ns;
    d.communication_ns = t.communication_ns;
    d.communication_overlap_ns = t.communication_ns + t.compute_ns - t.kernel_ns;
    d.communication_overlap_share = ratio(d.communication_overlap_ns, t.communication_ns);
    communication_union += t.communication_ns;
    r.devices.push_back(d);
  }
  if (r.communication_kernels > 0) r.communication_share = ratio(communication_union, r.window_ns);

  for (const RuntimeStats& c : a.runtime_calls) {
    if (is_launch_call(c.name)) r.launch_calls += c.count;
    if (is_host_sync_call(c.name)) {
      r.sync_calls += c.count;
      r.sync_call_ns += c.total_ns;
    }
  }
  r.launches_recorded = r.launch_calls > 0;
  for (const SyncStats& s : a.syncs) {
    if (s.kind == SyncKind::StreamWaitEvent) continue;
    r.sync_records += s.count;
    r.sync_record_ns += s.total_ns;
  }
  return r;
}

}  // namespace fathom
