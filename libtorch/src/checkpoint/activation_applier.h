#pragma once
// What a joint activation plan (fathom/activation_plan.h) asks of each unit, and the part of it
// this build can run. Torch-free: plain plans in, plain actions and segments out.
//
// A unit whose groups are all kept runs plainly; all recomputed, it runs through the block
// checkpointing fathom has (fathom::checkpoint over the unit). A unit that keeps some groups and
// recomputes or offloads others needs selective checkpointing (a keep list inside a checkpointed
// unit) and activation offloading, which this build does not have: UnitAction names what such a
// unit keeps and offloads (by the positions of the ops that produce them in the unit's forward)
// for the applier that will, and apply_whole_units runs it whole instead: kept, if the plan
// still fits its budget so, else recomputed whole, deciding unit by unit in chain order with
// evaluate_activations, and says which units it changed.
#include <fathom/activation_plan.h>

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
};

// group_ops[unit][group]: the positions of each group's ops (unit_measure.h's MeasuredUnit); a
// group's output is that of its last op. A kept group that saves nothing (a unit's last product,
// whose output only the next unit saves) holds nothing either way: a unit that recomputes all its
// other groups is recomputed whole (the same memory, that group's time more).
std::vector<UnitAction> unit_actions(const std::vector<ActivationUnit>& units,
                                     const ActivationAssignment& assignment,
                                     const std::vector<std::vector<std::vector<int>>>& group_ops);

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
