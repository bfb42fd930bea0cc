#pragma once
// What `fathom analyze --json` writes, and reads back for `fathom diff`: schema "fathom.analysis"
// (docs/report-schema.md). Version 1 held the GPU section alone; version 2 adds the export's
// devices, the findings and what the Nsight reader skipped, each absent when the input had none.
#include <fathom/gpu_summary.h>
#include <fathom/replay.h>
#include <fathom/report.h>

#include <optional>
#include <string>
#include <vector>

#include "advise/export_analysis.h"

namespace fathom {

struct AnalysisDocument {
  std::string input;
  GpuSummary gpu;
  std::vector<DeviceAnalysis> devices;  // a multi-GPU Nsight export: one section per device
  std::vector<Finding> findings;
  std::optional<NsightExportInfo> nsight;
};

std::string format_analysis_json(const AnalysisDocument& d);
// Throws fathom::Error naming source_name and the problem.
AnalysisDocument parse_analysis_json(const std::string& text, const std::string& source_name);
// Whether a JSON text is an analysis (its "schema"), without reading the rest.
bool is_analysis_json(const std::string& text);

}  // namespace fathom
