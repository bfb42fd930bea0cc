#pragma once
// A checkpoint plan and what it is made from: the chain of blocks as measured, the segments a
// plan checkpoints, and its predicted cost. The planner that makes it, and the memory model the
// fields follow, are checkpoint_planner.h's.
#include <cstdint>
#include <string>
#include <vector>

namespace fathom {

struct ChainBlock {
  std::string name;
  std::int64_t own_bytes = 0;           // c_i
  std::int64_t input_saved_bytes = 0;   // in_i
  std::int64_t output_saved_bytes = 0;  // out_i
  std::int64_t input_bytes = 0;         // b_{i-1}
  std::int64_t output_bytes = 0;        // b_i
  double forward_ms = 0;                // t_i
  bool aliases_input = false;  // its output shares storage with its input (view, in-place op)
};

// Blocks [begin, end) of the chain, 0-based.
struct CheckpointSegment {
  int begin = 0;
  int end = 0;
  bool operator==(const CheckpointSegment&) const = default;
};

struct PlanCost {
  std::int64_t stored_bytes = 0;  // M: held after forward
  std::int64_t peak_bytes = 0;    // the predicted peak
  double recompute_ms = 0;
};

struct CheckpointPlan {
  bool feasible = false;
  std::vector<CheckpointSegment> segments;  // checkpointed, in chain order
  std::int64_t budget_bytes = 0;
  std::int64_t unconstrained_peak_bytes = 0;  // no checkpointing
  std::int64_t min_feasible_budget_bytes = 0;
  std::int64_t predicted_peak_bytes = 0;  // of this plan (the unconstrained peak if infeasible)
  std::int64_t stored_bytes = 0;
  double recompute_ms = 0;
  double forward_ms = 0;  // the whole chain, once
  std::string message;    // one line: what was chosen, or why nothing fits and what would
  // False when a front grew past its cap (chains far longer than 200 blocks) and was thinned: the
  // plan still fits the budget but may recompute slightly more than the optimum.
  bool exact = true;
};

// Blocks whose output aliases their input, merged into the block before them (the first block
// into the one after it). groups[g] lists the original indices merged into fused block g.
struct FusedChain {
  std::vector<ChainBlock> blocks;
  std::vector<std::vector<int>> groups;
};

}  // namespace fathom
