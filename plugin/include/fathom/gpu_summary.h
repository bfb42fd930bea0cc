#pragma once
// The GPU section of a report: the Tensor Core, transfer and timeline analyses of one source
// (a session's CUPTI records, a PyTorch profiler trace, a replay file), with what could not be
// measured and why (analyze/summarize_gpu.h makes it). Written to JSON and the terminal with the
// rest of the report.
#include <fathom/gpu_analysis.h>
#include <fathom/gpu_records.h>
#include <fathom/unmeasured.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fathom {

struct GpuSummary {
  std::string source;  // "cupti", "kineto trace", "replay"
  std::vector<DeviceProperties> devices;
  bool gpu_activity = false;  // false: the source holds no kernel, copy or memset
  TensorCoreResult tensor_cores;
  TransferResult transfers;
  TimelineResult timeline;
  std::vector<StepGpu> steps;         // per step, when the source asked for them (`fathom analyze`)
  std::int64_t steps_not_listed = 0;  // steps past the table's limit: in the totals only
  std::int64_t records = 0;
  std::int64_t dropped_records = 0;  // totals are lower bounds when this is not 0
  std::vector<Unmeasured> not_measured;
};

struct GpuSummaryOptions {
  std::string source;
  LinkPeak link;
};

}  // namespace fathom
