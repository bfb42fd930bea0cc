#pragma once
// `fathom analyze` on an Nsight Systems export: the records streamed through the same aggregation,
// analyses and advisor a live session runs, into one report epoch (the export's steps and phases,
// its GPU section, the findings) and, for a multi-GPU export, one GPU section per device.
#include <fathom/gpu_summary.h>
#include <fathom/replay.h>
#include <fathom/report.h>

#include <string>
#include <vector>

namespace fathom {

struct DeviceAnalysis {
  std::int32_t device = 0;
  GpuSummary gpu;  // the device's records and the host records of the processes that used it
};

struct ExportAnalysis {
  std::string input;
  NsightExportInfo info;
  RunReport report;  // one epoch: steps and phases from the export's ranges, GPU section, findings
  std::vector<DeviceAnalysis> devices;  // one per device when the export has more than one
};

// Throws fathom::Error naming the file and the problem (replay.h's read_nsight_export); each pass
// reads under budget.
ExportAnalysis analyze_nsight_export(const std::string& path, const GpuSummaryOptions& options,
                                     const NsightReadBudget& budget = {});

}  // namespace fathom
