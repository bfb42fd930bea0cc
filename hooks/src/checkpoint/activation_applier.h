#pragma once
// What a joint activation plan (fathom/activation_plan.h) asks of each unit, and the part of it
// this build can run. Torch-free: plain plans in, plain actions and segments out.
//
// A unit whose groups are all kept runs plainly; all recomputed, it runs through block
// checkpointing (fathom::checkpoint over the unit); kept in part, it runs as mixed_unit.h says
// (selective checkpointing, offloading), naming the groups by the positions of the ops that
// produce their saved storages in the unit's forward. Where this process cannot run selective
// checkpoints (the dispatcher refused fathom's op interception), apply_whole_units runs each such
// unit whole instead: kept, if the plan still fits its budget so, else recomputed whole,
// deciding unit by unit in chain order with evaluate_activations, and says which units it changed.
#include <fathom/activation_planner.h>

#include <string>
#include <vector>

namespace fathom::detail {

enum class UnitActionKind {
  Keep,       // run plainly
  Recompute,  // checkpointed whole
  Mixed,      // some groups kept, others recomputed or offloaded
};

struct UnitAction {
  UnitActionKind kind = UnitActionKind::Keep;
  std::vector<int> kept_op_positions;       // Mixed: ops whose outputs stay on the device
  std::vector<int> offloaded_op_positions;  // Mixed: ops whose outputs go to host memory
  bool recomputes = false;                  // Mixed: some group is recomputed
  bool offloads_input = false;              // Mixed: what it holds of its input goes to the host
};

// producers[unit][group]: the position of the op that makes each group's output (unit_measure.h's
// MeasuredUnit::group_producer; -1 when not known: the group is then not named). A kept group that
// saves nothing (a unit's last product, whose output only the next unit saves) holds nothing
// either way: a unit that recomputes all its other groups is recomputed whole (the same memory,
// that group's time more).
std::vector<UnitAction> unit_actions(const std::vector<ActivationUnit>& units,
                                     const ActivationAssignment& assignment,
                                     const std::vector<std::vector<int>>& producers);

// The whole-recompute segments a plan runs: its own, and each Recompute unit outside them.
std::vector<CheckpointSegment> recompute_segments(const ActivationAssignment& assignment,
                                                  const std::vector<UnitAction>& actions);

// What unit i's offloaded tensors may take when they come back ahead: the backward of the next
// unit that offloads starts their copy, and they stay through the backwards down to unit i's.
// The model predicts each unit's backward peak without them (activation_plan.h), so this is what
// the budget leaves free at the fullest of those backwards (OffloadOptions::prefetch_ahead_bytes).
// -1 (no limit) when no unit after it offloads: nothing starts them ahead.
std::int64_t prefetch_ahead_bytes(const ActivationPlan& plan,
                                  const std::vector<UnitAction>& actions, std::size_t unit);

struct WholeUnitPlan {
  ActivationAssignment
      assignment;  // every unit all kept or all recomputed, segments for the latter
  ActivationCost cost;
  bool fits = false;                              // cost.peak_bytes within the budget
  std::vector<int> kept_whole, recomputed_whole;  // Mixed units, as they are run instead
  std::string message;  // what changed from the plan ("" when nothing did)
};

// The plan as whole units: Recompute units (and the plan's segments) checkpointed, Mixed ones
// kept or recomputed whole as above.
WholeUnitPlan apply_whole_units(const std::vector<ActivationUnit>& units,
                                const ActivationPlan& plan, const std::vector<UnitAction>& actions,
                                const ActivationPlanOptions& options);

}  // namespace fathom::detail
