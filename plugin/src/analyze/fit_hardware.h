#pragma once
// The hardware fit (fathom/hardware_fit.h) from what a run measured.
#include <fathom/hardware_fit.h>
#include <fathom/records.h>

#include <cstdint>
#include <optional>
#include <string>

namespace fathom {

// device_used_bytes: the device's own peak "memory used" (NVML), to measure the overhead outside
// the allocator; peak: the allocator's peaks. Either may be absent.
HardwareFit hardware_fit(const MemoryFootprint& m, const std::optional<DeviceMemoryPeak>& peak,
                         std::optional<std::int64_t> device_used_bytes);

struct EpochSummary;
struct Environment;
// The fit every writer of an epoch (terminal, JSON, HTML, the advisor's finding) shows: from the
// epoch's footprint, allocator peaks and NVML's peak used, the cards compared only on a GPU run
// (one rule, so the JSON cannot table GPU cards the terminal drops). nullopt without a footprint.
std::optional<HardwareFit> epoch_hardware_fit(const EpochSummary& e, const Environment& env);

// The reason no configuration was estimated, when every variant has the same one (activations
// not measured): the writers say it once, not once per row (issue 24: five times in a report).
std::optional<std::string> shared_not_estimated_reason(const HardwareFit& fit);

// The share of capacity at or under which a need counts as fitting with room to spare.
Fit fit_on(std::int64_t need_bytes, std::int64_t capacity_bytes) noexcept;

}  // namespace fathom
