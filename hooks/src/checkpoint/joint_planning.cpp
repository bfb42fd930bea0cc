// The checkpoint extension's joint plan: its chains' measured op groups as the joint planner's
// units (activation_plan.h), the plan for the block plan's budget, and, in Auto, the part of it
// this build runs (activation_applier.h) with the block plan's report rewritten for the
// segments that run.
#include <fathom/activation_planner.h>
#include <fathom/checkpoint_planner.h>
#include <fathom/gpu_summary.h>
#include <fathom/module_report.h>

#include <algorithm>

#include "analyze/activation_plan_report.h"
#include "base/bytes_text.h"
#include "checkpoint/activation_applier.h"
#include "checkpoint/checkpoint_extension.h"

namespace fathom::detail {
namespace {

std::string ms_text(double ms) {
  const std::string s = std::to_string(ms);
  return s.substr(0, s.find('.') + 4) + " ms";
}

}  // namespace

double measured_link_bytes_per_second(const TransferResult& transfers) {
  double least = 0;
  for (const TransferDirection& d : transfers.directions) {
    if (d.direction != MemcpyKind::HostToDevice && d.direction != MemcpyKind::DeviceToHost)
      continue;
    if (!d.gb_per_s || *d.gb_per_s <= 0) continue;
    const double b = *d.gb_per_s * 1e9;
    least = least > 0 ? std::min(least, b) : b;
  }
  return least;
}

std::optional<ActivationPlanReport> CheckpointExtension::plan_joint(
    const Chain& c, std::int64_t activation_budget, const std::string& budget_text, bool apply,
    CheckpointPlanReport& block, std::vector<MixedRun>* mixed_runs) const {
  const FusedChain fused = fused_chain(c);
  // A fused unit (a block and the views or in-place items after it) is its items' groups in
  // order; an item's reads of its input are reads of the item before's last group.
  std::vector<ActivationUnit> units;
  std::vector<std::vector<int>> producers;  // [unit][group]: op positions in the unit's forward
  for (std::size_t f = 0; f < fused.groups.size(); ++f) {
    ActivationUnit u;
    u.name = fused.blocks[f].name;
    std::vector<int> made_by;
    int op_offset = 0;
    const std::vector<int>& members = fused.groups[f];
    for (std::size_t k = 0; k < members.size(); ++k) {
      if (members[k] >= static_cast<int>(c.blocks.size())) return std::nullopt;
      const BlockStats& b = c.blocks[members[k]];
      const ActivationUnit& part = b.unit.unit;
      if (part.groups.empty()) return std::nullopt;  // not measured by op: no joint plan
      // The groups' host times, scaled to the block's forward as measured (device time on a GPU).
      double block_ms = b.calls ? b.ms_total / static_cast<double>(b.calls) : b.last.forward_ms;
      if (b.device_calls) block_ms = b.device_ms_total / static_cast<double>(b.device_calls);
      double part_ms = 0;
      for (const SavedGroup& g : part.groups) part_ms += g.forward_ms;
      const double scale = part_ms > 0 && block_ms > 0 ? block_ms / part_ms : 1.0;
      if (k == 0) {
        u.input_bytes = b.last.input_bytes;
        u.input_saved_bytes = part.input_saved_bytes;
      } else if (part.input_saved_bytes > 0) {
        u.groups.back().saved_bytes = std::max(u.groups.back().saved_bytes, part.input_saved_bytes);
      }
      const int offset = static_cast<int>(u.groups.size());
      for (std::size_t g = 0; g < part.groups.size(); ++g) {
        SavedGroup x = part.groups[g];
        x.forward_ms *= scale;
        for (int& in : x.inputs) {
          if (in != kUnitInput)
            in += offset;
          else if (k > 0)
            in = offset - 1;
        }
        if (members.size() > 1) x.name = b.name + ": " + x.name;
        u.groups.push_back(std::move(x));
        const int producer = g < b.unit.group_producer.size() ? b.unit.group_producer[g] : -1;
        made_by.push_back(producer < 0 ? -1 : producer + op_offset);
      }
      op_offset += b.unit.ops;
      u.output_bytes = b.last.output_bytes;
    }
    units.push_back(std::move(u));
    producers.push_back(std::move(made_by));
  }
  if (units.empty()) return std::nullopt;

  ActivationPlanOptions options;
  // A CPU has no link; the stand-in (tests, the benchmark) plans as if it had one.
  const bool on_cpu = !device_ || device_->is_cpu();
  const double stand_in = on_cpu ? cpu_offload_stand_in() : 0.0;
  options.link_bytes_per_second = link_bytes_per_second_ > 0 ? link_bytes_per_second_ : stand_in;
  options.max_segment_units = c.registered ? 1 : 0;  // registered blocks: one by one
  const ActivationPlan plan =
      plan_activations(units, std::max<std::int64_t>(activation_budget, 0), options);
  ActivationPlanReport r = activation_plan_report(c.label, units, plan, options);
  r.budget = budget_text;
  const std::vector<UnitAction> actions = unit_actions(units, plan.assignment, producers);
  const bool mixed = std::any_of(actions.begin(), actions.end(), [](const UnitAction& a) {
    return a.kind == UnitActionKind::Mixed;
  });
  std::string cannot_mix;
  const bool can_mix = !mixed || selective_checkpointing_available(&cannot_mix);
  if (!apply) {
    // The whole-unit part of the plan is code the user can run today; the units kept in part
    // need fathom's own runner.
    std::vector<CheckpointSegment> whole_segments;
    for (std::size_t i = 0; i < actions.size(); ++i)
      if (actions[i].kind == UnitActionKind::Recompute)
        whole_segments.push_back({static_cast<int>(i), static_cast<int>(i) + 1});
    r.code = whole_segments.empty() ? "// let fathom apply it: FATHOM_MODE=auto"
                                    : plan_code(c, unfuse_segments(fused, whole_segments));
    if (mixed)
      r.code +=
          "\n// the units kept in part (some of their op groups kept, recomputed or offloaded) "
          "run\n// through fathom's selective checkpointing: FATHOM_MODE=auto applies them";
    return r;
  }
  ActivationPlan ran = plan;
  std::vector<CheckpointSegment> whole_segments;
  std::string whole_message;
  if (can_mix) {
    whole_segments = recompute_segments(plan.assignment, actions);
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const UnitAction& action = actions[i];
      if (action.kind != UnitActionKind::Mixed) continue;
      const std::vector<int>& members = fused.groups[i];
      MixedRun m;
      m.begin = members.front();
      m.end = members.back() + 1;
      m.run.kept = action.kept_op_positions;
      m.run.offloaded = action.offloaded_op_positions;
      m.run.recompute = action.recomputes;
      m.run.offload_input = action.offloads_input;
      if (stand_in > 0) m.run.offload.cpu_copy(true);
      m.run.offload.name(c.label + ": " + units[i].name);
      m.run.offload.prefetch_ahead_bytes(prefetch_ahead_bytes(plan, actions, i));
      if (mixed_runs) mixed_runs->push_back(std::move(m));
    }
  } else {
    const WholeUnitPlan whole = apply_whole_units(units, plan, actions, options);
    if (!whole.fits && block.feasible) {
      // What can run of the joint plan does not fit, the block plan does: run that.
      r.message += "; " + whole.message + " run whole, its units would not fit the budget (" +
                   bytes_text(whole.cost.peak_bytes) +
                   "), so fathom runs the block plan instead (" + cannot_mix + ")";
      return r;
    }
    ran.assignment = whole.assignment;
    ran.cost = whole.cost;
    ran.feasible = whole.fits;
    whole_segments = whole.assignment.segments;
    whole_message = whole.message + " (" + cannot_mix + "; the plan itself: peak " +
                    bytes_text(plan.cost.peak_bytes) + ", " + ms_text(plan.cost.extra_ms()) +
                    " extra a step)";
  }
  ActivationPlanReport a = activation_plan_report(c.label, units, ran, options);
  a.budget = budget_text;
  a.message = plan.message;
  if (!whole_message.empty()) a.message += "; " + whole_message;
  a.applied = !whole_segments.empty() || (mixed && can_mix);
  // The block plan's report, for the whole-recompute segments that run: the footprint and the
  // measured saved bytes compare with it.
  const PlanCost cost = evaluate_plan(fused.blocks, whole_segments);
  block.segments = unfuse_segments(fused, whole_segments);
  block.predicted_peak_bytes = cost.peak_bytes;
  block.predicted_stored_bytes = cost.stored_bytes;
  block.recompute_ms = cost.recompute_ms;
  block.feasible = cost.peak_bytes <= block.budget_bytes;
  block.message = "the joint activation plan's whole units: " + a.message;
  block.applied = a.applied;
  block.code = block.segments.empty() ? "" : plan_code(c, block.segments);
  a.code = block.code;
  if (mixed && can_mix)
    a.code += std::string(a.code.empty() ? "" : "\n") +
              "// the units kept in part run through fathom's selective checkpointing and "
              "offloading (FATHOM_MODE=auto)";
  return a;
}

}  // namespace fathom::detail
