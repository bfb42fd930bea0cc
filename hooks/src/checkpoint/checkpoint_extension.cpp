#include "checkpoint/checkpoint_extension.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>
#include <fathom/checkpoint_planner.h>
#include <fathom/memory_budget.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "advise/advisor.h"
#include "base/warning_sink.h"
#include "framework/module_type_name.h"
#include "framework/session_state.h"
#include "measure/saved_tensor_meter.h"

namespace fathom::detail {
namespace {

constexpr auto kAggregate = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);

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

void CheckpointExtension::on_watch_model(const torch::nn::Module& model,
                                         const std::string& /*name*/) {
  names_[&model] = short_type_name(model.name());
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false))
    names_[item.value().get()] = item.key() + " (" + short_type_name(item.value()->name()) + ")";
}

std::string CheckpointExtension::label_of(const torch::nn::Module& module,
                                          int index_in_parent) const {
  if (auto it = names_.find(&module); it != names_.end()) return it->second;
  const std::string type = short_type_name(module.name());
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
    // What the chain keeps after its forward under the plan: on a CPU, which has no allocator
    // statistics, this is the measured side of the joint plan's peak (fathom never resets the
    // allocator's run peak, so a GPU step's own peak is not known either).
    if (c.joint && c.joint->applied) c.joint->measured_peak_bytes = stored;
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
                                     std::unique_ptr<DeviceTiming> timing, MeasuredUnit unit) {
  Chain& c = chains_[chain];
  if (static_cast<int>(c.blocks.size()) <= index) c.blocks.resize(index + 1);
  BlockStats& b = c.blocks[index];
  b.last = block;
  b.last.name = b.name;
  b.measured = true;
  ++b.calls;
  b.ms_total += block.forward_ms;
  if (!unit.unit.groups.empty()) {
    unit.unit.name = b.name;
    b.unit = std::move(unit);
  }
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
      detail::warn("block device timing failed: ", e.what());
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
    detail::warn("could not release cached device memory: ", e.what());
  }
}

// --- planning
// -------------------------------------------------------------------------------------

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
    if (c.joint && !c.joint->applied) c.joint.reset();
  }
}

void CheckpointExtension::found_blocks_inside(const void* block) noexcept {
  try {
    if (!holding_blocks_.count(block)) found_holding_.insert(block);
  } catch (const std::exception&) {
    // Out of memory for one pointer: the model stays one block.
  }
}

void CheckpointExtension::on_step_begin(std::int64_t step) noexcept {
  step_ = step;
  recompute_ns_->store(0, std::memory_order_relaxed);
  plan_in_force_ = std::any_of(chains_.begin(), chains_.end(), [](const Chain& c) {
    return !c.applied.empty() || !c.mixed.empty();
  });
  // Whether saved tensors can be seen is known at the step's first chain (capture_ready).
  profiling_ =
      capture_ != Capture::Off && capture_ != Capture::Unavailable && step < kProfiledSteps;
  // A step that measures: blocks found inside others become the chain from here. The registered
  // chain starts over (it held the outer blocks whole); a step that does not measure keeps it, so
  // the epoch's activation bytes stay those measured.
  if (profiling_ && !found_holding_.empty()) {
    try {
      holding_blocks_.merge(found_holding_);
    } catch (const std::exception&) {
    }
    found_holding_.clear();
    for (Chain& c : chains_) {
      if (!c.registered) continue;
      Chain fresh;
      fresh.key = c.key;
      fresh.label = std::move(c.label);
      fresh.registered = true;
      c = std::move(fresh);
    }
  }
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
  if (const std::int64_t ns = recompute_ns_->exchange(0); !failed && plan_in_force_) {
    planned_recompute_ms_ += static_cast<double>(ns) / 1e6;
    ++planned_steps_;
  }
  try {
    resolve_timings(/*wait=*/profiling_);
    for (std::size_t i = 0; i < chains_.size(); ++i) {
      Chain& c = chains_[i];
      if (c.registered && c.called_this_step)
        end_call(static_cast<int>(i), !c.checkpointed_this_step);
    }
    if (step_peak_) epoch_peak_ = std::max(epoch_peak_.value_or(0), *step_peak_);
    if (!failed && profiling_ && auto_mode()) {
      for (ChainPlan& p : choose_plans(step_peak_, /*apply=*/true)) {
        Chain& c = chains_[p.chain];
        c.applied = p.block.segments;
        c.mixed = std::move(p.mixed);
        c.plan = std::move(p.block);
        c.joint = std::move(p.joint);
      }
    }
  } catch (const std::exception& e) {
    detail::warn("checkpoint planning failed: ", e.what());
  }
  if (profiling_ && capture_ == Capture::On) ++profiled_steps_;
  profiling_ = false;  // chains run between steps are not measured
}

void CheckpointExtension::on_epoch_measured(EpochSummary& epoch,
                                            Environment& environment) noexcept {
  // The section, plans included, is complete before the advisor makes their findings.
  write_section(epoch, environment);
}

void CheckpointExtension::on_footprint(FootprintParts& parts, Environment& environment) noexcept {
  try {
    std::int64_t activation_bytes = 0, blocks = 0;
    bool checkpointing = false, measured = false;
    for (const Chain& c : chains_) {
      if (!c.seen_this_epoch) continue;
      // As run: a chain Auto checkpoints keeps only its segments' inputs (the plan in force), not
      // what it would keep unchecked (issue 16: the "as run" fit ignored the checkpointing).
      if (c.measured) {
        // A joint plan with units kept in part holds what it predicts; a block plan, its own.
        activation_bytes += !c.mixed.empty() && c.joint
                                ? c.joint->predicted_stored_bytes
                                : evaluate_plan(chain_blocks(c), c.applied).stored_bytes;
        blocks += c.size;
        measured = true;
      }
      checkpointing = checkpointing || !c.applied.empty() || !c.mixed.empty();
    }
    ActivationBytes a;
    if (measured) {
      a.saved_bytes = activation_bytes;
    } else if (capture_ == Capture::Off) {
      a.why = std::string("the autograd-engine hook is ") + kAutogradHookOff;
    } else if (capture_ == Capture::Unavailable) {
      a.why = capture_unavailable_why_;
    } else if (environment.language == LoopLanguage::Python) {
      a.why =
          "the model's forward runs in Python, where fathom does not see what it saves for "
          "backward";
    } else {
      a.why =
          "no model ran through fathom::forward(model, x) or fathom::block(layer, x) in a "
          "profiled step (the first " +
          std::to_string(kProfiledSteps) + " of an epoch), so fathom saw none of its activations";
    }
    if (blocks > 0) a.checkpointable_blocks = blocks;
    a.checkpointing = checkpointing;
    parts.activations = a;
  } catch (const std::exception& e) {
    detail::warn("activation bytes not added to the footprint: ", e.what());
  }
}

void CheckpointExtension::write_section(EpochSummary& epoch, Environment& environment) noexcept {
  try {
    resolve_timings(/*wait=*/true);
    if (epoch.gpu) link_bytes_per_second_ = measured_link_bytes_per_second(epoch.gpu->transfers);
    if (options_.mode() >= Mode::Suggest) {
      for (ChainPlan& p : choose_plans(epoch_peak_, /*apply=*/false)) {
        chains_[p.chain].plan = std::move(p.block);
        chains_[p.chain].joint = std::move(p.joint);
      }
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
      if (c.joint) {
        ActivationPlanReport j = *c.joint;
        // Nothing is offloaded in this build: the extra time is the recompute's.
        if (j.applied && planned_steps_ > 0)
          j.measured_extra_ms = planned_recompute_ms_ / static_cast<double>(planned_steps_);
        m.activation_plans.push_back(std::move(j));
      }
    }
    m.out_of_memory = out_of_memory_;
    // Turned off: the session said so once, at its start.
    if (capture_ == Capture::Unavailable)
      environment.not_measured.push_back(
          {"activation bytes per module", capture_unavailable_why_, UnmeasuredId::ActivationBytes});
    if (!m.modules.empty() || !m.plans.empty() || !m.activation_plans.empty() ||
        !m.out_of_memory.empty())
      epoch.modules = std::move(m);
  } catch (const std::exception& e) {
    detail::warn("the per-module section could not be written: ", e.what());
  }
}

}  // namespace fathom::detail
