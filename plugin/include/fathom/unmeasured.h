#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fathom {

// Which measurement an Unmeasured entry is about, so writers find "why is there no device
// memory chart" by id rather than by words in a sentence. The JSON report writes it as its name.
enum class UnmeasuredId : std::uint8_t {
  Other,            // anything else: the entry's `what` says it
  GpuActivity,      // CUPTI records: kernels, copies, runtime calls
  DeviceMemory,     // the caching allocator's peaks per phase and per module
  DeviceTelemetry,  // NVML: utilization, power, clocks, the PCIe link
  ActivationBytes,  // per-module activation bytes (the autograd saved-tensor hook)
  OptimizerState,   // the optimizer state's bytes in the footprint
  OpRanges,         // ATen op NVTX ranges
};
inline constexpr std::array<std::string_view, 7> kUnmeasuredIdNames{
    "other",           "gpu_activity", "device_memory", "device_telemetry", "activation_bytes",
    "optimizer_state", "op_ranges"};

constexpr std::string_view unmeasured_id_name(UnmeasuredId id) noexcept {
  return kUnmeasuredIdNames[static_cast<std::size_t>(id)];
}
constexpr std::optional<UnmeasuredId> unmeasured_id_from_name(std::string_view name) noexcept {
  for (std::size_t i = 0; i < kUnmeasuredIdNames.size(); ++i)
    if (kUnmeasuredIdNames[i] == name) return static_cast<UnmeasuredId>(i);
  return std::nullopt;
}

// Something fathom could not measure in this run, and why. Reports print these plainly instead
// of a number.
struct Unmeasured {
  std::string what;
  std::string why;
  UnmeasuredId id = UnmeasuredId::Other;
};

}  // namespace fathom
