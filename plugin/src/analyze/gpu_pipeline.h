#pragma once
// The one path from records to the GPU analyses, whatever their source: a live session's CUPTI
// batches, an activity file, a Kineto trace, an Nsight export. Batches go into one aggregator
// (kernel names normalized once per name; launches, ops and phases kept until their GPU work
// arrives) and the analyses read its snapshot. No source builds this by hand, so a fix made
// here reaches every source (issue 23).
#include <fathom/gpu_records.h>
#include <fathom/gpu_summary.h>

#include <cstddef>

#include "aggregate/gpu_aggregator.h"
#include "analyze/summarize_gpu.h"

namespace fathom {

class GpuPipeline {
 public:
  explicit GpuPipeline(AggregatorLimits limits = {}) : aggregator_(limits) {}

  // A batch of any source (host records first, then the GPU work), or one record.
  void add(const GpuActivity& batch) noexcept { aggregator_.add(batch); }
  template <typename Record>
  void add(const Record& r) noexcept {
    aggregator_.add(r);
  }
  // A step's records are in: the held window is swept (the live session's step end).
  void step_end() noexcept { aggregator_.flush(); }
  // What has been aggregated so far, and the analyses of it.
  GpuAggregate aggregate() { return aggregator_.snapshot(); }
  GpuSummary summary(const GpuSummaryOptions& options) {
    return summarize_gpu(aggregator_.snapshot(), options);
  }

 private:
  GpuAggregator aggregator_;
};

// A source held in memory whole, in one sweep (every record sees its neighbours); step_rows as
// in AggregatorLimits.
GpuSummary summarize_activity(const GpuActivity& activity, const GpuSummaryOptions& options,
                              std::size_t step_rows = 0);

}  // namespace fathom
