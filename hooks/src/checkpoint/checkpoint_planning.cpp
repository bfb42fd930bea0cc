// The checkpoint extension's planning: its chains as the planner's blocks, the plans chosen under
// the memory budget (Suggest lists them, Auto applies them), and the tighter plan after an
// out-of-memory error. The lifecycle and the report section are in checkpoint_extension.cpp.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>
#include <fathom/checkpoint_planner.h>
#include <fathom/memory_budget.h>

#include <algorithm>
#include <cmath>

#include "advise/advisor.h"
#include "base/warning_sink.h"
#include "checkpoint/checkpoint_extension.h"

namespace fathom::detail {
namespace {

std::string first_line(const std::exception& e) {
  const char* text = e.what();
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    text = c10_error->what_without_backtrace();
  std::string s(text ? text : "");
  return s.substr(0, s.find('\n'));
}

std::string segments_text(const std::vector<CheckpointSegment>& segments) {
  std::string s;
  for (const CheckpointSegment& seg : segments) {
    if (!s.empty()) s += ", ";
    s += "{" + std::to_string(seg.begin) + ", " + std::to_string(seg.end) + "}";
  }
  return s;
}

}  // namespace

std::vector<ChainBlock> CheckpointExtension::chain_blocks(const Chain& c) const {
  std::vector<ChainBlock> out;
  for (int i = 0; i < c.size && i < static_cast<int>(c.blocks.size()); ++i) {
    const BlockStats& b = c.blocks[i];
    ChainBlock block = b.last;
    block.name = b.name;
    if (b.calls > 0) block.forward_ms = b.ms_total / static_cast<double>(b.calls);
    out.push_back(block);
  }
  return out;
}

std::string CheckpointExtension::plan_code(const Chain& c,
                                           const std::vector<CheckpointSegment>& segments) const {
  std::string code;
  if (c.registered) {
    code =
        "// checkpoint these blocks of the step: call fathom::checkpoint(layer, x) instead of\n"
        "// fathom::block(layer, x) for";
    for (const CheckpointSegment& s : segments)
      for (int i = s.begin; i < s.end; ++i) code += "\n//   " + c.blocks[i].name;
  } else {
    code =
        "// checkpoint blocks [begin, end) of " + c.label + "\n" +
        "const std::vector<fathom::CheckpointSegment> plan{" + segments_text(segments) + "};\n" +
        "x = fathom::forward(sequential, x, plan);  // instead of fathom::forward(sequential, x)";
  }
  code += "\n// or let fathom apply it: FATHOM_MODE=auto";
  if (options_.checkpoint_budget()) {
    const MemoryBudget& b = *options_.checkpoint_budget();
    code += " FATHOM_CHECKPOINT_BUDGET=" +
            (b.is_fraction()
                 ? std::to_string(static_cast<int>(std::lround(b.fraction_of_whole() * 100))) + "%"
                 : std::to_string(b.byte_count()));
  }
  return code;
}

FusedChain CheckpointExtension::fused_chain(const Chain& c) const {
  std::vector<ChainBlock> blocks = chain_blocks(c);
  if (!c.registered) return fuse_aliasing_blocks(blocks);
  FusedChain fused;
  for (int i = 0; i < static_cast<int>(blocks.size()); ++i) fused.groups.push_back({i});
  fused.blocks = std::move(blocks);
  return fused;
}

CheckpointPlanReport CheckpointExtension::plan_chain(const Chain& c, std::int64_t activation_budget,
                                                     const std::string& budget_text,
                                                     bool apply) const {
  const FusedChain fused = fused_chain(c);
  const int max_segment = c.registered ? 1 : 0;
  CheckpointPlan plan =
      plan_checkpoints(fused.blocks, std::max<std::int64_t>(activation_budget, 0), max_segment);
  CheckpointPlanReport r;
  r.chain = c.label;
  r.budget = budget_text;
  r.budget_bytes = plan.budget_bytes;
  r.unconstrained_peak_bytes = plan.unconstrained_peak_bytes;
  r.min_feasible_budget_bytes = plan.min_feasible_budget_bytes;
  r.forward_ms = plan.forward_ms;
  r.feasible = plan.feasible;
  r.message = plan.message;
  if (!plan.feasible) {
    // Nothing fits: the least-memory plan is still the best fathom can do.
    plan = plan_checkpoints(fused.blocks, plan.min_feasible_budget_bytes, max_segment);
    r.message +=
        "; " + std::string(apply ? "applying" : "the best is") + " the plan that needs the least";
  }
  r.segments = unfuse_segments(fused, plan.segments);
  r.predicted_peak_bytes = plan.predicted_peak_bytes;
  r.predicted_stored_bytes = plan.stored_bytes;
  r.recompute_ms = plan.recompute_ms;
  r.applied = apply && !r.segments.empty();
  r.code = r.segments.empty() ? "" : plan_code(c, r.segments);
  return r;
}

std::vector<CheckpointExtension::ChainPlan> CheckpointExtension::choose_plans(
    std::optional<std::int64_t> step_peak, bool apply) const {
  std::vector<int> candidates;
  std::vector<std::int64_t> unconstrained;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < chains_.size(); ++i) {
    const Chain& c = chains_[i];
    if (!c.measured || !c.applied.empty() || !c.mixed.empty() || c.size == 0) continue;
    const std::int64_t peak = evaluate_plan(chain_blocks(c), {}).peak_bytes;
    candidates.push_back(static_cast<int>(i));
    unconstrained.push_back(peak);
    total += peak;
  }
  if (candidates.empty() || total <= 0) return {};
  // Whether and how far to shrink is the advisor's decision, as for its memory findings.
  const std::optional<ActivationTarget> goal =
      checkpoint_activation_target(total, step_peak, device_ ? device_memory_bytes_ : std::nullopt,
                                   options_.checkpoint_budget());
  if (!goal) return {};
  const std::int64_t target = goal->bytes;
  const std::string& budget_text = goal->budget;
  std::vector<ChainPlan> out;
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    // Each chain gives up its share of the excess.
    const auto share = static_cast<std::int64_t>(
        static_cast<double>(unconstrained[k]) *
        static_cast<double>(std::max<std::int64_t>(target, 0)) / static_cast<double>(total));
    ChainPlan p;
    p.chain = candidates[k];
    const Chain& c = chains_[candidates[k]];
    p.block = plan_chain(c, share, budget_text, apply);
    try {
      CheckpointPlanReport block = p.block;
      std::vector<MixedRun> mixed;
      p.joint = plan_joint(c, share, budget_text, apply, block, &mixed);
      p.mixed = std::move(mixed);
      p.block = std::move(block);
    } catch (const std::exception& e) {
      // The block plan stands: a joint plan that cannot be made takes nothing from it.
      detail::warn("the joint activation plan of ", c.label, " was not made: ", e.what());
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string CheckpointExtension::tighten() noexcept {
  std::string done;
  try {
    for (Chain& c : chains_) {
      if (c.size == 0) continue;
      if (c.measured) {
        const std::vector<ChainBlock> blocks = chain_blocks(c);
        const std::int64_t now = c.plan && !c.applied.empty()
                                     ? c.plan->predicted_peak_bytes
                                     : evaluate_plan(blocks, {}).peak_bytes;
        CheckpointPlanReport r =
            plan_chain(c, now / 2, "half the activation peak that ran out of memory", true);
        if (r.predicted_peak_bytes >= now || r.segments.empty()) continue;  // cannot do better
        c.applied = r.segments;
        c.mixed.clear();
        c.plan = std::move(r);
        c.joint.reset();  // the block plan runs now, not the joint one
      } else if (!c.registered && c.applied.empty()) {
        // Not measured yet (memory ran out in the first step): sqrt(n) equal segments.
        c.applied = sqrt_segments(c.size);
        if (c.applied.empty()) continue;
        CheckpointPlanReport r;
        r.chain = c.label;
        r.budget = "unknown: out of memory before the chain was measured";
        r.feasible = true;
        r.applied = true;
        r.segments = c.applied;
        r.message = "sqrt(n) equal segments (" + std::to_string(c.applied.size() + 1) +
                    " segments of " + std::to_string(c.size) +
                    " blocks), until the chain is measured";
        r.code = plan_code(c, c.applied);
        c.plan = std::move(r);
      } else {
        continue;
      }
      int blocks = 0;
      for (const CheckpointSegment& s : c.applied) blocks += s.end - s.begin;
      if (!done.empty()) done += "; ";
      done += "checkpointed " + std::to_string(blocks) + " of " + std::to_string(c.size) +
              " blocks of " + c.label;
    }
  } catch (const std::exception& e) {
    detail::warn("could not plan checkpointing after running out of memory: ", e.what());
  }
  return done;
}

std::size_t CheckpointExtension::record_out_of_memory(const std::exception& error) {
  OutOfMemoryEvent o;
  o.step = step_;
  o.phase = phase_.value_or(Phase::Forward);
  try {
    if (current_.first >= 0 && current_.first < static_cast<int>(chains_.size())) {
      const Chain& c = chains_[current_.first];
      if (current_.second >= 0 && current_.second < static_cast<int>(c.blocks.size()))
        o.module = c.blocks[current_.second].name;
    }
    o.error = first_line(error);
  } catch (...) {
    detail::swallowed("checkpoint/checkpoint_extension.cpp");
  }
  o.peak_allocated_bytes = allocator_peak();
  o.device_memory_bytes = device_memory_bytes_;
  out_of_memory_.push_back(std::move(o));
  return out_of_memory_.size() - 1;
}

// --- session lifecycle
// ------------------------------------------------------------------------------

}  // namespace fathom::detail
