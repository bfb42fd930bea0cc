#pragma once
// An activation plan and what it is made from: the chain's units with the groups of saved
// tensors each keeps, recomputes or offloads, an assignment of those choices, and its predicted
// cost. The planner that makes it, and the memory and time model the fields follow, are
// activation_planner.h's.
#include <fathom/checkpoint_plan.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fathom {

// A group's index in SavedGroup::inputs that stands for the unit's input x_{i-1}.
inline constexpr int kUnitInput = -1;

struct SavedGroup {
  std::string name;
  std::int64_t saved_bytes = 0;  // s_g: what backward saves of its output
  double forward_ms = 0;         // t_g: its recompute time
  double flops = 0;              // f_g: its recompute FLOPs (fathom's counter; 0 = not counted)
  bool expensive = false;        // matmul, convolution, attention (reported; costs decide)
  std::vector<int> inputs;       // earlier groups of the unit it reads, kUnitInput for x_{i-1}
};

struct ActivationUnit {
  std::string name;
  std::int64_t input_bytes = 0;        // b_{i-1}
  std::int64_t input_saved_bytes = 0;  // in_i: what the unit's ops save of their input
  std::int64_t output_bytes = 0;       // b_i
  std::vector<SavedGroup> groups;      // in forward order; the last one's output is b_i
};

enum class TensorChoice { Keep, Recompute, Offload };

struct ActivationPlanOptions {
  double link_bytes_per_second = 0;  // B: host<->device, each way; 0 = unknown, no offloading
  double backward_to_forward = 2.0;  // r: a unit's backward time over its forward time
  int max_segment_units = 0;         // > 0 bounds whole-recompute segments (1: units one by one)
  // A state's Pareto front, or a unit's choices, beyond this many points are thinned (evenly over
  // the memory they hold; ActivationPlan::exact = false): small chains never reach it, and it
  // keeps 200 units under a second.
  int max_front_points = 1024;
};

// One assignment: a choice per group of every unit, and the whole-recompute segments (whose
// units' choices are all Recompute).
struct ActivationAssignment {
  std::vector<std::vector<TensorChoice>> choices;  // [unit][group]
  std::vector<CheckpointSegment> segments;         // units [begin, end), in chain order
  // [unit]: what the unit holds of its input x_{i-1} (u_i: in_i, or all of it when a recomputed
  // group reads it), Keep or Offload; empty, or Keep, for units in segments (their input is the
  // segment's, kept). Empty: every input kept.
  std::vector<TensorChoice> inputs;
  TensorChoice input(std::size_t unit) const {
    return unit < inputs.size() ? inputs[unit] : TensorChoice::Keep;
  }
};

// One unit's part of an ActivationCost: what the report's per-module table shows.
struct UnitActivationCost {
  std::int64_t kept_bytes = 0;
  std::int64_t recomputed_bytes = 0;
  std::int64_t offloaded_bytes = 0;
  std::int64_t peak_bytes = 0;  // at its backward (a segment's units: the segment's recompute)
  double recompute_ms = 0;
  double exposed_transfer_ms = 0;
  double recompute_flops = 0;
  double extra_ms() const { return recompute_ms + exposed_transfer_ms; }
};

struct ActivationCost {
  std::int64_t stored_bytes = 0;  // M
  std::int64_t peak_bytes = 0;
  std::int64_t kept_bytes = 0;        // saved bytes of kept groups
  std::int64_t recomputed_bytes = 0;  // ... of recomputed groups
  std::int64_t offloaded_bytes = 0;   // ... of offloaded groups
  double recompute_ms = 0;
  double exposed_transfer_ms = 0;  // transfer time not hidden behind compute
  double recompute_flops = 0;
  std::vector<UnitActivationCost> units;  // in chain order
  double extra_ms() const { return recompute_ms + exposed_transfer_ms; }
};

struct ActivationPlan {
  bool feasible = false;
  ActivationAssignment assignment;  // the least-memory one when nothing fits
  ActivationCost cost;              // of assignment
  std::int64_t budget_bytes = 0;
  std::int64_t unconstrained_peak_bytes = 0;  // everything kept
  std::int64_t min_feasible_budget_bytes = 0;
  double forward_ms = 0;           // the whole chain, once
  double forward_flops = 0;        // the whole chain, once
  bool offload_available = false;  // a link was measured (B > 0)
  std::string message;  // what was chosen, or why nothing fits and what would; no-link fallback
  // False when a front grew past its cap and was thinned: the plan still fits the budget but may
  // cost slightly more than the optimum.
  bool exact = true;
};

}  // namespace fathom
