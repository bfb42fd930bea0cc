// The replay entry points of <fathom/replay.h> that join the readers (formats/) to the aggregation
// (aggregate/) and the analyses: the same path a live session's records take.
#include <fathom/replay.h>

#include "aggregate/gpu_aggregator.h"
#include "analyze/activity_replay.h"
#include "analyze/gpu_pipeline.h"
#include "analyze/summarize_gpu.h"
#include "formats/activity_file.h"

namespace fathom {

GpuSummary analyze_activity(const GpuActivity& activity, const GpuSummaryOptions& options) {
  return summarize_activity(activity, options);
}

GpuSummary summarize_activity(const GpuActivity& activity, const GpuSummaryOptions& options,
                              std::size_t step_rows) {
  return summarize_gpu(aggregate(activity, step_rows), options);
}

void replay_activity(const std::string& path, GpuAggregator& into) {
  read_activity(path, [&](GpuActivity&& b) { into.add(b); });
}

}  // namespace fathom
