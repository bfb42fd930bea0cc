#pragma once
// The GPU section of a report: the Tensor Core, transfer and timeline analyses of one source
// (a session's CUPTI records, a PyTorch profiler trace, a replay file), with what could not be
// measured and why. Written to JSON and the terminal with the rest of the report.
#include <fathom/gpu_analysis.h>
#include <fathom/gpu_records.h>
#include <fathom/unmeasured.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fathom {

struct GpuAggregate;

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

GpuSummary summarize_gpu(const GpuAggregate& a, const GpuSummaryOptions& options = {});

// The section alone, as the report writers put it in an epoch (terminal text; a JSON object).
std::string format_gpu_summary_text(const GpuSummary& s);
std::string format_gpu_summary_json(const GpuSummary& s);
// Throws fathom::Error naming source_name and the problem.
GpuSummary parse_gpu_summary_json(const std::string& text, const std::string& source_name);

// What `fathom analyze` writes: {"schema": "fathom.analysis", "schema_version", "input", "gpu",
// "devices", "findings", "nsight"} (docs/report-schema.md); this writes the first four.
inline constexpr int kAnalysisSchemaVersion = 2;
std::string format_gpu_analysis_json(const GpuSummary& s, const std::string& input_path);

}  // namespace fathom
