#include "checkpoint/checkpoint_extension.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>
#include <fathom/memory_budget.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "advise/advisor.h"
#include "measure/saved_tensor_meter.h"
#include "records/warning_sink.h"
#include "session/session_state.h"

namespace fathom::detail {
namespace {

// "torch::nn::Conv2dImpl" -> "Conv2d"
std::string short_type(const std::string& name) {
  std::string s = name.substr(name.rfind(':') == std::string::npos ? 0 : name.rfind(':') + 1);
  if (s.size() > 4 && s.compare(s.size() - 4, 4, "Impl") == 0) s.resize(s.size() - 4);
  return s;
}

constexpr auto kAggregate = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);

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

CheckpointExtension::CheckpointExtension(const Options& options, std::optional<c10::Device> device,
                                         std::optional<std::int64_t> device_memory_bytes)
    : options_(options), device_(device), device_memory_bytes_(device_memory_bytes) {
  if (!options_.autograd_hook()) {
    capture_ = Capture::Off;
    capture_unavailable_why_ = kAutogradHookOff;
  } else {
    capture_unavailable_why_ = "no chain ran in the first " + std::to_string(kProfiledSteps) +
                               " steps of an epoch, where fathom measures them";
  }
}

// The engine hook goes in at the first profiled chain, not with the session: it replaces
// LibTorch's autograd engine for the rest of the process.
bool CheckpointExtension::capture_ready() noexcept {
  if (capture_ == Capture::NotYet)
    capture_ = SavedTensorCapture::available(&capture_unavailable_why_) ? Capture::On
                                                                        : Capture::Unavailable;
  return capture_ == Capture::On;
}

CheckpointExtension::~CheckpointExtension() = default;

CheckpointExtension* CheckpointExtension::active() noexcept {
  SessionState* s = SessionState::current();
  return s ? s->extensions().checkpoint : nullptr;
}

void CheckpointExtension::watch(const torch::nn::Module& model) {
  names_[&model] = short_type(model.name());
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false))
    names_[item.value().get()] = item.key() + " (" + short_type(item.value()->name()) + ")";
}

std::string CheckpointExtension::label_of(const torch::nn::Module& module,
                                          int index_in_parent) const {
  if (auto it = names_.find(&module); it != names_.end()) return it->second;
  const std::string type = short_type(module.name());
  return index_in_parent >= 0 ? std::to_string(index_in_parent) + " (" + type + ")" : type;
}

// --- chains
// ---------------------------------------------------------------------------------------

int CheckpointExtension::chain(const void* key, const std::string& label, bool registered) {
  for (std::size_t i = 0; i < chains_.size(); ++i)
    if (chains_[i].key == key) return static_cast<int>(i);
  Chain c;
  c.key = key;
  c.label = label;
  c.registered = registered;
  chains_.push_back(std::move(c));
  return static_cast<int>(chains_.size()) - 1;
}

void CheckpointExtension::begin_call(int chain, int blocks) {
  Chain& c = chains_[chain];
  c.saved.clear();
  c.seen_this_epoch = true;
  c.called_this_step = true;
  c.checkpointed_this_step = false;
  if (blocks > 0) {
    c.size = blocks;
    if (static_cast<int>(c.blocks.size()) < blocks) c.blocks.resize(blocks);
  }
}

void CheckpointExtension::end_call(int chain, bool plain) {
  Chain& c = chains_[chain];
  if (!profiling_) return;
  std::int64_t stored = 0;
  for (const auto& [storage, bytes] : c.saved) stored += bytes;
  if (plain) {
    c.measured = std::all_of(c.blocks.begin(), c.blocks.begin() + c.size,
                             [](const BlockStats& b) { return b.measured; });
  } else {
    c.measured_with_plan = stored;
    if (c.plan) c.plan->measured_stored_bytes = stored;
  }
}

bool CheckpointExtension::named(int chain, int index) const {
  const Chain& c = chains_[chain];
  return index < static_cast<int>(c.blocks.size()) && !c.blocks[index].name.empty();
}

void CheckpointExtension::name_block(int chain, int index, std::string name) {
  Chain& c = chains_[chain];
  if (static_cast<int>(c.blocks.size()) <= index) c.blocks.resize(index + 1);
  c.size = std::max(c.size, index + 1);
  c.blocks[index].name = std::move(name);
}

void CheckpointExtension::set_checkpointed(int chain, int index, bool checkpointed) {
  Chain& c = chains_[chain];
  if (index < static_cast<int>(c.blocks.size())) c.blocks[index].checkpointed = checkpointed;
  if (checkpointed) c.checkpointed_this_step = true;
}

void CheckpointExtension::add_sample(int chain, int index, const ChainBlock& block,
                                     std::unique_ptr<DeviceTiming> timing) {
  Chain& c = chains_[chain];
  if (static_cast<int>(c.blocks.size()) <= index) c.blocks.resize(index + 1);
  BlockStats& b = c.blocks[index];
  b.last = block;
  b.last.name = b.name;
  b.measured = true;
  ++b.calls;
  b.ms_total += block.forward_ms;
  if (timing) timings_.push_back(PendingTiming{chain, index, std::move(timing)});
}

void CheckpointExtension::resolve_timings(bool wait) noexcept {
  while (!timings_.empty()) {
    PendingTiming& t = timings_.front();
    try {
      if (wait) {
        t.events->stop.synchronize();
      } else if (!t.events->stop.query()) {
        return;
      }
      const double ms = t.events->start.elapsedTime(t.events->stop);
      if (t.chain < static_cast<int>(chains_.size()) &&
          t.block < static_cast<int>(chains_[t.chain].blocks.size())) {
        BlockStats& b = chains_[t.chain].blocks[t.block];
        b.device_ms_total += ms;
        ++b.device_calls;
      }
    } catch (const std::exception& e) {
      detail::warn("checkpoint: block device timing failed",
                   "block device timing failed: ", e.what());
    }
    timings_.pop_front();
  }
}

std::optional<std::int64_t> CheckpointExtension::allocator_peak() const noexcept {
  if (!device_) return std::nullopt;
  try {
    auto stats = c10::getDeviceAllocator(device_->type())->getDeviceStats(device_->index());
    // The run's peak (fathom never resets the allocator's peaks: they are the user's).
    return stats.allocated_bytes[kAggregate].peak;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void CheckpointExtension::release_cached_memory() noexcept {
  if (!device_) return;
  try {
    c10::getDeviceAllocator(device_->type())->emptyCache();
  } catch (const std::exception& e) {
    detail::warn("checkpoint: could not release cached device memory",
                 "could not release cached device memory: ", e.what());
  }
}

// --- planning
// -------------------------------------------------------------------------------------

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

CheckpointPlanReport CheckpointExtension::plan_chain(const Chain& c, std::int64_t activation_budget,
                                                     const std::string& budget_text,
                                                     bool apply) const {
  const std::vector<ChainBlock> blocks = chain_blocks(c);
  // Registered blocks are checkpointed one by one, as the loop calls them; a Sequential's views
  // and in-place items merge into the item before them.
  FusedChain fused;
  if (c.registered) {
    fused.blocks = blocks;
    for (int i = 0; i < static_cast<int>(blocks.size()); ++i) fused.groups.push_back({i});
  } else {
    fused = fuse_aliasing_blocks(blocks);
  }
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

std::vector<std::pair<int, CheckpointPlanReport>> CheckpointExtension::choose_plans(
    std::optional<std::int64_t> step_peak, bool apply) const {
  std::vector<int> candidates;
  std::vector<std::int64_t> unconstrained;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < chains_.size(); ++i) {
    const Chain& c = chains_[i];
    if (!c.measured || !c.applied.empty() || c.size == 0) continue;
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
  std::vector<std::pair<int, CheckpointPlanReport>> out;
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    // Each chain gives up its share of the excess.
    const auto share = static_cast<std::int64_t>(
        static_cast<double>(unconstrained[k]) *
        static_cast<double>(std::max<std::int64_t>(target, 0)) / static_cast<double>(total));
    out.emplace_back(candidates[k], plan_chain(chains_[candidates[k]], share, budget_text, apply));
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
        c.plan = std::move(r);
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
    detail::warn("checkpoint: could not plan checkpointing after running out of memory",
                 "could not plan checkpointing after running out of memory: ", e.what());
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

void CheckpointExtension::on_epoch_begin(std::int64_t) noexcept {
  profiled_steps_ = 0;
  epoch_peak_.reset();
  out_of_memory_.clear();
  for (Chain& c : chains_) {
    c.seen_this_epoch = false;
    for (BlockStats& b : c.blocks) {
      b.calls = 0;
      b.ms_total = 0;
      b.device_ms_total = 0;
      b.device_calls = 0;
    }
    // A suggestion is remade each epoch; an applied plan stays in force.
    if (c.plan && !c.plan->applied) c.plan.reset();
  }
}

void CheckpointExtension::on_step_begin(std::int64_t step) noexcept {
  step_ = step;
  // Whether saved tensors can be seen is known at the step's first chain (capture_ready).
  profiling_ =
      capture_ != Capture::Off && capture_ != Capture::Unavailable && step < kProfiledSteps;
  registered_next_ = 0;
  optimizer_started_ = false;
  phase_.reset();
  step_peak_.reset();
  current_ = {-1, -1};
  for (Chain& c : chains_) c.called_this_step = false;
}

void CheckpointExtension::on_phase_begin(Phase phase) noexcept {
  phase_ = phase;
  if (phase == Phase::Optimizer) optimizer_started_ = true;
}

void CheckpointExtension::on_phase_end(Phase, bool) noexcept {
  if (auto peak = allocator_peak()) step_peak_ = std::max(step_peak_.value_or(0), *peak);
}

void CheckpointExtension::on_step_end(std::int64_t, bool failed) noexcept {
  try {
    resolve_timings(/*wait=*/profiling_);
    for (std::size_t i = 0; i < chains_.size(); ++i) {
      Chain& c = chains_[i];
      if (c.registered && c.called_this_step)
        end_call(static_cast<int>(i), !c.checkpointed_this_step);
    }
    if (step_peak_) epoch_peak_ = std::max(epoch_peak_.value_or(0), *step_peak_);
    if (!failed && profiling_ && auto_mode()) {
      for (auto& [index, report] : choose_plans(step_peak_, /*apply=*/true)) {
        Chain& c = chains_[index];
        c.applied = report.segments;
        c.plan = std::move(report);
      }
    }
  } catch (const std::exception& e) {
    detail::warn("checkpoint: checkpoint planning failed",
                 "checkpoint planning failed: ", e.what());
  }
  if (profiling_ && capture_ == Capture::On) ++profiled_steps_;
  profiling_ = false;  // chains run between steps are not measured
}

void CheckpointExtension::on_epoch_measured(EpochSummary& epoch,
                                            Environment& environment) noexcept {
  // The section, plans included, is complete before the advisor makes their findings.
  write_section(epoch, environment);
}

void CheckpointExtension::on_footprint(FootprintParts& parts, Environment&) noexcept {
  try {
    std::int64_t activation_bytes = 0, blocks = 0;
    bool checkpointing = false;
    for (const Chain& c : chains_) {
      if (!c.seen_this_epoch) continue;
      if (c.measured) {
        activation_bytes += evaluate_plan(chain_blocks(c), {}).stored_bytes;
        blocks += c.size;
      }
      checkpointing = checkpointing || (c.plan && c.plan->applied);
    }
    ActivationBytes a;
    a.saved_bytes = activation_bytes;
    if (blocks > 0) a.checkpointable_blocks = blocks;
    a.checkpointing = checkpointing;
    parts.activations = a;
  } catch (const std::exception& e) {
    detail::warn("checkpoint: activation bytes not added to the footprint",
                 "activation bytes not added to the footprint: ", e.what());
  }
}

void CheckpointExtension::write_section(EpochSummary& epoch, Environment& environment) noexcept {
  try {
    resolve_timings(/*wait=*/true);
    if (options_.mode() >= Mode::Suggest) {
      for (auto& [index, report] : choose_plans(epoch_peak_, /*apply=*/false))
        chains_[index].plan = std::move(report);
    }
    ModuleReport m;
    m.source =
        capture_ == Capture::On
            ? "saved-tensor hooks on fathom's autograd engine, deduplicated by storage; forward "
              "time by host clock" +
                  std::string(device_ ? " and device events" : "")
            : "not measured: " + capture_unavailable_why_;
    m.profiled_steps = profiled_steps_;
    for (const Chain& c : chains_) {
      if (!c.seen_this_epoch) continue;
      for (int i = 0; i < c.size && i < static_cast<int>(c.blocks.size()); ++i) {
        const BlockStats& b = c.blocks[i];
        ModuleMeasurement x;
        x.chain = c.label;
        x.name = b.name;
        x.calls = b.calls;
        x.own_bytes = b.last.own_bytes;
        x.input_saved_bytes = b.last.input_saved_bytes;
        x.output_saved_bytes = b.last.output_saved_bytes;
        x.saved_bytes = x.own_bytes + x.input_saved_bytes + x.output_saved_bytes;
        x.input_bytes = b.last.input_bytes;
        x.output_bytes = b.last.output_bytes;
        x.aliases_input = b.last.aliases_input;
        x.forward_ms = b.calls ? b.ms_total / static_cast<double>(b.calls) : b.last.forward_ms;
        if (b.device_calls)
          x.forward_device_ms = b.device_ms_total / static_cast<double>(b.device_calls);
        x.checkpointed = b.checkpointed;
        m.modules.push_back(std::move(x));
      }
      if (c.plan) {
        CheckpointPlanReport p = *c.plan;
        if (epoch.step_ms_mean() > 0) p.step_overhead = p.recompute_ms / epoch.step_ms_mean();
        m.plans.push_back(std::move(p));
      }
    }
    m.out_of_memory = out_of_memory_;
    // Turned off: the session said so once, at its start.
    if (capture_ == Capture::Unavailable)
      environment.not_measured.push_back(
          {"activation bytes per module", capture_unavailable_why_, UnmeasuredId::ActivationBytes});
    if (!m.modules.empty() || !m.plans.empty() || !m.out_of_memory.empty())
      epoch.modules = std::move(m);
  } catch (const std::exception& e) {
    detail::warn("checkpoint: the per-module section could not be written",
                 "the per-module section could not be written: ", e.what());
  }
}

}  // namespace fathom::detail
