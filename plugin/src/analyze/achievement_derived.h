#pragma once
// What the run achieved, derived from what was measured: the energy an epoch cost (NVML's counter
// on a GPU, the CPU packages' RAPL counters otherwise) per step and sample, and the throughput and
// model FLOPs utilization of the FLOPs counted in profiled steps (achievement.h).
#include <fathom/achievement.h>
#include <fathom/report.h>

#include <optional>
#include <string>

namespace fathom {

// package_j: the CPU packages' energy over the epoch, or nullopt with package_why.
EnergySummary summarize_energy(const EpochSummary& e, std::optional<double> package_j,
                               const std::string& package_why);

// Fills f's achieved rows, step FLOP/s, peak and MFU from e's phase times (device time on a GPU,
// wall time on a CPU) and the device's dense peak for f.dominant_dtype (gpu_throughput.h); what
// cannot be derived goes to f.not_measured.
void derive_flops_throughput(FlopsSummary& f, const EpochSummary& e, const Environment& env);

}  // namespace fathom
