#pragma once
// A Chrome / Perfetto trace (JSON trace events, open in ui.perfetto.dev or chrome://tracing) of
// what a run recorded: steps, phases and copies on the host, and the GPU's kernels, copies,
// memsets and synchronizations where there are GPU records.
#include <fathom/gpu_records.h>
#include <fathom/records.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace fathom {

struct TraceInput {
  std::string process_name = "fathom";
  std::span<const StepRecord> steps;
  std::span<const PhaseRecord> phases;
  std::span<const CopyRecord> copies;
  const GpuActivity* gpu = nullptr;
  // Add this to a GPU timestamp to get the host's steady clock. Without it the two clocks are
  // not comparable: each track starts at its own first event, and the trace says so.
  std::optional<std::int64_t> gpu_to_host_ns;
};

std::string format_chrome_trace(const TraceInput& in);

}  // namespace fathom
