#pragma once
// What the run achieved: the floating-point work of a step, counted from the ops that ran (in a
// few profiled steps), the throughput and model FLOPs utilization it reached against the device's
// peak, and the energy the epoch cost. Plain data, in each epoch of the report
// (docs/report-schema.md "flops", "energy"); the LibTorch layer counts, the core derives the rest.
#include <fathom/unmeasured.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fathom {

// One op's floating-point operations in one phase, for one input type, per profiled step.
struct OpFlops {
  std::string phase;  // "forward", "backward", ... (phase_name), or "unattributed"
  std::string op;     // the op counted: "aten::mm", "aten::convolution_backward", ...
  std::string dtype;  // its inputs' scalar type as torch names it: "float32", "bfloat16", ...
  double calls = 0;   // per step
  double flops = 0;   // per step
};

// Achieved FLOP/s of one phase: its FLOPs per step over its time per step.
struct PhaseThroughput {
  std::string phase;
  double flops_per_step = 0;
  double seconds_per_step = 0;
  std::string time_source;  // "device" (the phase's GPU time) or "wall" (its scope, on a CPU)
  std::optional<double> flops_per_s;
  std::optional<double> mfu;  // of the peak below
};

struct FlopsSummary {
  std::int64_t profiled_steps = 0;  // the steps counted; 0 means not counted (see not_measured)
  // Per step, over the profiled steps.
  double per_step = 0;  // all phases
  double forward = 0;
  double backward = 0;
  std::vector<OpFlops> by_op;  // per (phase, op, dtype), most FLOPs first
  std::string dominant_dtype;  // the type with the most FLOPs: the peak MFU is measured against

  // Derived from the epoch's phase times and the device's peak (the core fills these).
  std::vector<PhaseThroughput> achieved;
  std::optional<double> step_flops_per_s;  // per_step over the step's time
  std::optional<double> peak_flops_per_s;  // the device's dense peak for dominant_dtype
  std::string peak;                        // which peak: "NVIDIA H100 SXM, bf16 dense, 989 TFLOP/s"
  std::optional<double> mfu;               // step_flops_per_s / peak_flops_per_s
  std::vector<Unmeasured> not_measured;
};

struct EnergySummary {
  std::string source;  // "NVML total energy counter", "RAPL package counters (/sys/class/powercap)"
  std::optional<double> epoch_j;
  std::optional<double> per_step_j;
  std::optional<double> per_sample_j;
  std::optional<double> average_w;
  std::vector<Unmeasured> not_measured;
};

}  // namespace fathom
