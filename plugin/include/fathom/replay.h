#pragma once
// Replay: the GPU analyses on records captured elsewhere, for tools and `fathom analyze`: the
// records a trace file holds (trace_files.h) go through the same aggregation and analyses a live
// session runs.
#include <fathom/gpu_records.h>
#include <fathom/gpu_summary.h>
#include <fathom/trace_files.h>

namespace fathom {

// The aggregation and the analyses of a live session, on records in memory.
GpuSummary analyze_activity(const GpuActivity& activity, const GpuSummaryOptions& options = {});

}  // namespace fathom
