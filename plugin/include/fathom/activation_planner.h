#pragma once
// Which saved tensors of a chain to keep, recompute or offload to host memory so that the
// activations fit a budget with the least predicted extra step time: today's chain DP
// (checkpoint_planner.h) with a choice per saved tensor inside each unit, in the spirit of
// Rockmate (op-level rematerialization inside blocks under rotor's sequence DP) and of torch's
// selective activation checkpointing (a kept op's output is not recomputed: its kernel does not
// run again in the recompute pass).
//
// The memory model (every number is a measurement of a plain, not checkpointed, forward):
//
//   Units 1..n run in order; boundary value x_j is the output of unit j and the input of unit
//   j+1, b_j bytes (input_bytes / output_bytes). Unit i runs op groups g = 1..m_i in order; a
//   group is the ops up to one tensor that backward saves (ops whose outputs nobody saves belong
//   to the group that reads them: their time is in its forward_ms). Group g saves s_g bytes,
//   recomputes in t_g ms (f_g FLOPs), and reads the unit's input and/or earlier groups' outputs.
//   The last group's output is the unit's output x_i. The unit's own ops save in_i bytes of
//   x_{i-1}. Each group is one of
//     Keep       held on the device from its forward to its unit's backward;
//     Recompute  freed after forward and rebuilt in the recompute pass before its unit's
//                backward, from its inputs, which are then kept, offloaded (back by then) or
//                recomputed themselves; a recomputed group that reads the unit's input needs
//                all of x_{i-1} held: the unit then keeps b_{i-1} of it instead of in_i;
//     Offload    copied to pinned host memory on a side stream after its forward, freed on the
//                device, copied back before its unit's backward.
//   What a unit outside segments holds of its input, u_i, is kept or offloaded too: offloaded,
//   the unit holds none of it after forward (its boundary then holds only what the unit before
//   keeps of it, o_{i-1}) and its backward gets u_i back, counted with its transfers.
//   Kept and offloaded groups are not run again in the recompute pass, so a unit's recompute
//   time is the sum of its recomputed groups' t_g (keeping an expensive group's output saves
//   its recompute and lets the cheap groups after it be rebuilt from it).
//   For unit i under a choice: K_i = Σ s_g kept but the output group, o_i = s_last if the output
//   group is kept (else 0), T_i = Σ s_g recomputed or offloaded (and u_i when the input is
//   offloaded), u_i = b_{i-1} if a recomputed group reads the unit's input, else in_i (0 held
//   when offloaded). Boundary j holds the largest part kept of it:
//     need_j = max(o_j, u_{j+1}, b_j if a whole-recompute segment starts at unit j+1)
//   Whole-recompute segments [s..e] (several units sharing one kept input, as in
//   checkpoint_planner.h) hold nothing of their units after forward and rebuild all of them.
//   Stored after forward:  M = Σ_i K_i + Σ_j need_j
//   Unit i's backward (units outside segments):  H_i + need_{i-1} + K_i + o_i + A_i, where H_i
//   is everything stored for units and boundaries before i, and A_i what its backward brings
//   back: T_i when the unit recomputes a group (the recompute pass runs first, and may read
//   offloaded tensors), else its fetch window W_i: such a unit fetches its offloaded items (its
//   offloaded groups and input) in the order backward uses them, one ahead of the one in use
//   (OffloadOptions::fetch_ahead(1)), so it holds two of them at a time:
//   W_i = min(T_i, 2 x its largest offloaded item), whatever order a branching backward takes.
//   A segment's backward as checkpoint_planner.h states (its input held, all its units' groups
//   and boundaries rebuilt).
//   Predicted peak = the largest of these.
//
// The time model, with the link's bandwidth B (bytes/s each way, measured; 0 = unknown, so
// nothing is offloaded and the plan says so): unit i's offloaded bytes X_i take X_i / B to
// the host (its offloaded groups and input), overlapped with unit i+1's forward (t of all its
// groups), and X_i / B back,
// overlapped with unit i+1's backward (backward_to_forward times its forward). What is not
// overlapped is exposed:  E_i = max(0, X_i/B - F_{i+1}) + max(0, X_i/B - r·F_{i+1}); the last
// unit's transfers are wholly exposed. Predicted extra step time = Σ recompute time + Σ E_i.
//
// Not modelled: parameters, gradients and optimizer state (constant under any plan), the
// gradients flowing between units in backward, transient buffers inside one op, the recompute
// pass's own transient (the recomputed groups are counted all at once, as at the start of the
// unit's backward), unit i's prefetched tensors arriving during unit i+1's backward (counted at
// unit i's backward only; fathom's runtime brings back ahead only what the budget leaves free
// there, OffloadOptions::prefetch_ahead_bytes, and the rest at unit i's own backward, where the
// copy is exposed and this time model does not count it), the link shared between units whose
// transfers overrun their windows, and the time a recomputed unit adds to the window its
// neighbour's transfers overlap. Views and in-place ops must be inside the group of the tensor
// they alias (a group whose output aliases another's cannot be chosen apart from it).
//
// The planner is the chain DP of checkpoint_planner.cpp (state: unit, whether the unit before
// kept its output; value: the Pareto front of bytes held and extra time) whose step for a unit
// outside segments chooses among the unit's Pareto-optimal choices. A choice is worth its kept
// bytes K_i, its bytes at its backward (K_i + o_i + A_i), its u_i, whether it keeps its output,
// and its time; the choices are built group by group, dropping dominated ones (a partial choice
// also carries its largest offloaded group, for its fetch window). Of plans
// equal in predicted time the DP holds the least memory, so it offloads all the link hides; the
// plan found then keeps every offloaded group the budget allows at no more predicted time (a
// hidden transfer still takes pinned host memory and the link). Exact (equal to brute force over
// every assignment and segmentation in tests/plugin/analyze/activation_plan_test.cpp) unless a
// front grew past max_front_points and was thinned; bench/activation_plan_bench plans 200 units in
// well under a second of CPU. The least feasible budget is found by bisection on a feasibility pass
// that keeps the least memory per state.
#include <fathom/activation_plan.h>

#include <cstdint>
#include <vector>

namespace fathom {

// The model above for one assignment. Throws fathom::Error when its shape does not match the
// units, segments overlap or leave the chain, a segment's unit has a group not Recompute, an
// input index is not an earlier group, or a group is offloaded without a link (B = 0).
ActivationCost evaluate_activations(const std::vector<ActivationUnit>& units,
                                    const ActivationAssignment& assignment,
                                    const ActivationPlanOptions& options = {});

// The plan with the least predicted extra step time under budget_bytes (activation bytes). A
// budget no plan meets gives feasible = false, the least-memory plan, and the budget that fits.
ActivationPlan plan_activations(const std::vector<ActivationUnit>& units, std::int64_t budget_bytes,
                                const ActivationPlanOptions& options = {});

// The least budget any assignment fits in.
std::int64_t min_activation_budget(const std::vector<ActivationUnit>& units,
                                   const ActivationPlanOptions& options = {});

}  // namespace fathom
