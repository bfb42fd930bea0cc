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
#include <vector>

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

// The names both traces give (this one and a live session's, trace_event_stream.h), so they read
// like Nsight Systems and like each other: "Memcpy HtoD"; "GPU 0 (NVIDIA H200)".
std::string memcpy_event_name(MemcpyKind k);
std::string gpu_process_name(std::int32_t device, const std::vector<DeviceProperties>& devices);

}  // namespace fathom
