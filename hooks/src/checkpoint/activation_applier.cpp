#include "checkpoint/activation_applier.h"

#include <fathom/activation_planner.h>
#include <fathom/error.h>

#include <algorithm>

namespace fathom::detail {
namespace {

bool in_segment(const std::vector<CheckpointSegment>& segments, int unit) {
  for (const CheckpointSegment& s : segments)
    if (s.begin <= unit && unit < s.end) return true;
  return false;
}

std::string names(const std::vector<ActivationUnit>& units, const std::vector<int>& which) {
  std::string s;
  for (int i : which) s += (s.empty() ? "" : ", ") + units[i].name;
  return s;
}

// The assignment with Mixed units decided: recompute[i] for those recomputed whole.
ActivationAssignment whole(const ActivationPlan& plan, const std::vector<UnitAction>& actions,
                           const std::vector<bool>& recompute_mixed) {
  const auto& choices = plan.assignment.choices;
  ActivationAssignment a;
  a.choices = choices;
  a.segments = plan.assignment.segments;  // inputs: every one kept, as a unit run whole keeps it
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const int u = static_cast<int>(i);
    if (in_segment(plan.assignment.segments, u)) continue;
    const bool recompute = actions[i].kind == UnitActionKind::Recompute ||
                           (actions[i].kind == UnitActionKind::Mixed && recompute_mixed[i]);
    std::fill(a.choices[i].begin(), a.choices[i].end(),
              recompute ? TensorChoice::Recompute : TensorChoice::Keep);
    if (recompute) a.segments.push_back({u, u + 1});
  }
  std::sort(
      a.segments.begin(), a.segments.end(),
      [](const CheckpointSegment& x, const CheckpointSegment& y) { return x.begin < y.begin; });
  return a;
}

}  // namespace

std::vector<UnitAction> unit_actions(const std::vector<ActivationUnit>& units,
                                     const ActivationAssignment& assignment,
                                     const std::vector<std::vector<int>>& producers) {
  std::vector<UnitAction> out(assignment.choices.size());
  for (std::size_t i = 0; i < assignment.choices.size(); ++i) {
    const auto& choices = assignment.choices[i];
    UnitAction& a = out[i];
    bool all_keep = true, all_recompute = true, any_recompute = false;
    for (std::size_t g = 0; g < choices.size(); ++g) {
      const bool holds_nothing =
          i < units.size() && g < units[i].groups.size() && units[i].groups[g].saved_bytes == 0;
      all_keep = all_keep && choices[g] == TensorChoice::Keep;
      any_recompute = any_recompute || choices[g] == TensorChoice::Recompute;
      all_recompute = all_recompute && (choices[g] == TensorChoice::Recompute ||
                                        (choices[g] == TensorChoice::Keep && holds_nothing));
    }
    if (in_segment(assignment.segments, static_cast<int>(i)) || (all_recompute && any_recompute)) {
      a.kind = UnitActionKind::Recompute;
      continue;
    }
    a.offloads_input = assignment.input(i) == TensorChoice::Offload;
    if (all_keep && !a.offloads_input) continue;
    a.kind = UnitActionKind::Mixed;
    a.recomputes = any_recompute;
    for (std::size_t g = 0; g < choices.size(); ++g) {
      if (i >= producers.size() || g >= producers[i].size() || producers[i][g] < 0) continue;
      const int op = producers[i][g];
      if (choices[g] == TensorChoice::Keep) a.kept_op_positions.push_back(op);
      if (choices[g] == TensorChoice::Offload) a.offloaded_op_positions.push_back(op);
    }
  }
  return out;
}

std::vector<CheckpointSegment> recompute_segments(const ActivationAssignment& assignment,
                                                  const std::vector<UnitAction>& actions) {
  std::vector<CheckpointSegment> out = assignment.segments;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const int u = static_cast<int>(i);
    if (actions[i].kind == UnitActionKind::Recompute && !in_segment(assignment.segments, u))
      out.push_back({u, u + 1});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointSegment& x, const CheckpointSegment& y) {
    return x.begin < y.begin;
  });
  return out;
}

WholeUnitPlan apply_whole_units(const std::vector<ActivationUnit>& units,
                                const ActivationPlan& plan, const std::vector<UnitAction>& actions,
                                const ActivationPlanOptions& options) {
  if (actions.size() != units.size() || plan.assignment.choices.size() != units.size())
    throw Error("apply_whole_units: " + std::to_string(actions.size()) + " actions and " +
                std::to_string(plan.assignment.choices.size()) + " planned units for " +
                std::to_string(units.size()) + " units; give one of each per unit");
  // Mixed units start recomputed whole (the least memory); each, in chain order, is kept when
  // the plan still fits so.
  std::vector<bool> recompute(units.size(), false);
  std::vector<int> mixed;
  for (std::size_t i = 0; i < units.size(); ++i) {
    if (actions[i].kind != UnitActionKind::Mixed) continue;
    recompute[i] = true;
    mixed.push_back(static_cast<int>(i));
  }
  WholeUnitPlan r;
  for (int i : mixed) {
    recompute[i] = false;
    const ActivationCost kept =
        evaluate_activations(units, whole(plan, actions, recompute), options);
    if (kept.peak_bytes > plan.budget_bytes) recompute[i] = true;
  }
  r.assignment = whole(plan, actions, recompute);
  r.cost = evaluate_activations(units, r.assignment, options);
  r.fits = r.cost.peak_bytes <= plan.budget_bytes;
  for (int i : mixed) (recompute[i] ? r.recomputed_whole : r.kept_whole).push_back(i);
  if (!mixed.empty()) {
    r.message = "units the plan keeps in part (" + names(units, mixed) +
                ") run whole: this process cannot run selective checkpoints;";
    if (!r.recomputed_whole.empty()) r.message += " recomputed " + names(units, r.recomputed_whole);
    if (!r.kept_whole.empty())
      r.message += std::string(r.recomputed_whole.empty() ? "" : ";") + " kept " +
                   names(units, r.kept_whole);
  }
  return r;
}

namespace {

bool offloads(const UnitAction& a) {
  return a.kind == UnitActionKind::Mixed && (!a.offloaded_op_positions.empty() || a.offloads_input);
}

}  // namespace

std::int64_t prefetch_ahead_bytes(const ActivationPlan& plan,
                                  const std::vector<UnitAction>& actions, std::size_t unit) {
  std::int64_t free = -1;
  for (std::size_t j = unit + 1; j < actions.size() && j < plan.cost.units.size(); ++j) {
    const std::int64_t left =
        std::max<std::int64_t>(plan.budget_bytes - plan.cost.units[j].peak_bytes, 0);
    free = free < 0 ? left : std::min(free, left);
    if (offloads(actions[j])) return free;
  }
  return -1;
}

}  // namespace fathom::detail
