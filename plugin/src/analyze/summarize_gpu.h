#pragma once
// The GPU section of a report from one source's aggregate: the Tensor Core, transfer and timeline
// analyses, and what could not be measured and why.
#include <fathom/gpu_summary.h>

namespace fathom {

struct GpuAggregate;

GpuSummary summarize_gpu(const GpuAggregate& a, const GpuSummaryOptions& options = {});

}  // namespace fathom
