#pragma once
// The GPU timeline: how much of the window each device was busy, why it was idle (data loading,
// host synchronizations, launches that came too late), how many kernels were tiny, and how much
// of the communication (NCCL) ran while compute kernels ran.
#include <fathom/gpu_analysis.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace fathom {

struct GpuAggregate;

TimelineResult analyze_timeline(const GpuAggregate& a);

// The host's synchronizations, each once: a sync is seen twice, as its runtime call and as
// CUPTI's (or Kineto's) record of the wait, and either may be missing, so the larger of the two.
struct HostSyncs {
  std::int64_t count = 0;
  std::int64_t ns = 0;
};
inline HostSyncs host_syncs(const TimelineResult& t) {
  return {std::max(t.sync_calls, t.sync_records), std::max(t.sync_call_ns, t.sync_record_ns)};
}

}  // namespace fathom
