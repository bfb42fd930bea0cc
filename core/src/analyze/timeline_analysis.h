#pragma once
// The GPU timeline: how much of the window each device was busy, why it was idle (data loading,
// host synchronizations, launches that came too late), how many kernels were tiny, and how much
// of the communication (NCCL) ran while compute kernels ran.
#include <fathom/gpu_analysis.h>

#include <string>
#include <string_view>

namespace fathom {

struct GpuAggregate;

TimelineResult analyze_timeline(const GpuAggregate& a);

}  // namespace fathom
