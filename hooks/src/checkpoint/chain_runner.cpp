#include "checkpoint/chain_runner.h"

#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fathom/amp.h>
#include <fathom/block.h>
#include <fathom/checkpoint.h>
#include <fathom/error.h>
#include <fathom/session.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "checkpoint/chain_nesting.h"
#include "checkpoint/checkpoint_extension.h"
#include "checkpoint/mixed_unit.h"
#include "checkpoint/unit_measure.h"
#include "collect/clock.h"
#include "measure/saved_tensor_meter.h"

namespace fathom::detail {
namespace {

// Measures one block, or one checkpointed segment (index -1), of a profiled chain call: the
// storages it saves for backward, split into its input, its output and its own, and its forward
// time on the host clock and, on a GPU, between two events on the current stream; for a block,
// also its op groups as the joint planner reads them (unit_measure.h).
class Probe {
 public:
  Probe(CheckpointExtension& ext, int chain, int index, const at::Tensor& input)
      : ext_(ext), chain_(chain), index_(index), input_(storage_of(input)), input_tensor_(input) {
    if (index >= 0) recorder_.emplace();
    if (auto device = ext.device(); device && index >= 0) {
      try {
        auto timing =
            std::make_unique<CheckpointExtension::DeviceTiming>(CheckpointExtension::DeviceTiming{
                c10::Event(device->type(), c10::EventFlag::BACKEND_DEFAULT),
                c10::Event(device->type(), c10::EventFlag::BACKEND_DEFAULT)});
        timing->start.record(stream(*device));
        timing_ = std::move(timing);
      } catch (const std::exception&) {
        timing_.reset();  // host time only
      }
    }
    begin_ns_ = now_ns();
  }

  void finish(const at::Tensor& output) {
    const std::int64_t end_ns = now_ns();
    if (timing_) timing_->stop.record(stream(*ext_.device()));
    auto& saved = ext_.saved_in_call(chain_);
    MeasuredUnit unit;
    if (recorder_) unit = recorder_->finish(input_tensor_, saved);
    const SavedTensorCapture::Saved out = storage_of(output);
    ChainBlock b;
    for (const SavedTensorCapture::Saved& s : capture_.saved()) {
      if (s.storage == input_.storage) {
        b.input_saved_bytes = s.bytes;
      } else if (s.storage == out.storage) {
        b.output_saved_bytes = s.bytes;
      } else if (!saved.count(s.storage)) {
        b.own_bytes += s.bytes;
      }
      saved.emplace(s.storage, s.bytes);
    }
    if (index_ < 0) return;
    b.input_bytes = input_.bytes;
    b.output_bytes = out.bytes;
    b.aliases_input = out.storage && out.storage == input_.storage;
    const std::int64_t measuring_ns = recorder_ ? recorder_->overhead_ns() : 0;
    b.forward_ms =
        static_cast<double>(std::max<std::int64_t>(end_ns - begin_ns_ - measuring_ns, 0)) / 1e6;
    ext_.add_sample(chain_, index_, b, std::move(timing_), std::move(unit));
  }

 private:
  static c10::Stream stream(const c10::Device& d) {
    return c10::impl::getDeviceGuardImpl(d.type())->getStream(d);
  }

  CheckpointExtension& ext_;
  int chain_, index_;
  SavedTensorCapture::Saved input_;
  at::Tensor input_tensor_;
  std::unique_ptr<CheckpointExtension::DeviceTiming> timing_;
  std::int64_t begin_ns_ = 0;
  SavedTensorCapture capture_;
  std::optional<UnitRecorder> recorder_;  // after capture_: its capture nests inside the probe's
};

void check_segments(const std::vector<CheckpointSegment>& segments, int blocks) {
  int previous_end = 0;
  for (const CheckpointSegment& s : segments) {
    if (s.begin < previous_end || s.begin >= s.end || s.end > blocks) {
      throw Error("checkpoint segment {" + std::to_string(s.begin) + ", " + std::to_string(s.end) +
                  "} is empty, overlaps the one before, or lies outside the Sequential of " +
                  std::to_string(blocks) + " items; give ordered, disjoint ranges [begin, end)");
    }
    previous_end = s.end;
  }
}

using RecomputeClock = std::shared_ptr<std::atomic<std::int64_t>>;

// Adds the host time of a checkpointed part's recompute (the call in backward, under grad mode;
// the forward's call runs without it) to the session's clock.
class RecomputeTimer {
 public:
  explicit RecomputeTimer(const RecomputeClock& clock) noexcept
      : clock_(clock && at::GradMode::is_enabled() ? clock.get() : nullptr),
        begin_ns_(clock_ ? now_ns() : 0) {}
  ~RecomputeTimer() {
    if (clock_) clock_->fetch_add(now_ns() - begin_ns_, std::memory_order_relaxed);
  }
  RecomputeTimer(const RecomputeTimer&) = delete;
  RecomputeTimer& operator=(const RecomputeTimer&) = delete;

 private:
  std::atomic<std::int64_t>* clock_;
  std::int64_t begin_ns_;
};

// The forward of items [begin, end) of seq, each in its module's range, as a unit runs it (again
// in backward, after the caller returned: the holder is copied).
TensorFunction items_forward(torch::nn::Sequential& seq, int begin, int end, RecomputeClock clock) {
  return [seq, begin, end, clock](const at::Tensor& input) mutable {
    RecomputeTimer timer(clock);
    at::Tensor y = input;
    for (int i = begin; i < end; ++i) {
      auto& item = *(seq->begin() + i);
      ModuleScope range(*item.ptr());
      y = item.forward(y);
    }
    return y;
  };
}

// Items [begin, end) of seq as one checkpointed function.
at::Tensor checkpoint_items(torch::nn::Sequential& seq, int begin, int end, const at::Tensor& x,
                            const CheckpointOptions* selective, RecomputeClock clock = {}) {
  // Copied whole (its names were checked when it was built); the segment's modules are added.
  CheckpointOptions options = selective ? *selective : CheckpointOptions();
  for (int i = begin; i < end; ++i) options.module(seq->ptr(static_cast<std::size_t>(i)));
  return checkpoint(items_forward(seq, begin, end, clock), x, options);
}

// Items [m.begin, m.end) of seq as one unit that the joint plan keeps in part.
at::Tensor mixed_items(torch::nn::Sequential& seq, const CheckpointExtension::MixedRun& m,
                       const at::Tensor& x, RecomputeClock clock) {
  std::vector<std::shared_ptr<torch::nn::Module>> modules;
  for (int i = m.begin; i < m.end; ++i) modules.push_back(seq->ptr(static_cast<std::size_t>(i)));
  return run_mixed_unit(items_forward(seq, m.begin, m.end, clock), x, m.run, modules);
}

// Clears the current block on the way out unless an exception passes: then the out-of-memory
// diagnosis still knows which block was running.
class CurrentBlock {
 public:
  CurrentBlock(CheckpointExtension& ext, int chain, int index) noexcept
      : ext_(ext), exceptions_(std::uncaught_exceptions()) {
    ext_.set_current_block(chain, index);
  }
  ~CurrentBlock() {
    if (std::uncaught_exceptions() == exceptions_) ext_.clear_current_block();
  }
  CurrentBlock(const CurrentBlock&) = delete;
  CurrentBlock& operator=(const CurrentBlock&) = delete;

 private:
  CheckpointExtension& ext_;
  int exceptions_;
};

}  // namespace

at::Tensor run_sequential(torch::nn::Sequential& seq, const at::Tensor& input,
                          const std::vector<CheckpointSegment>* checkpointed,
                          const CheckpointOptions* selective) {
  const int n = static_cast<int>(seq->size());
  if (checkpointed) check_segments(*checkpointed, n);
  CheckpointExtension* ext = CheckpointExtension::active();
  if (ext && !ChainNesting::outermost()) {
    if (const void* outer = ChainNesting::enclosing_block()) ext->found_blocks_inside(outer);
    ext = nullptr;
  }
  int chain = -1;
  static const std::vector<CheckpointSegment> kNone;
  const std::vector<CheckpointSegment>* segments = checkpointed ? checkpointed : &kNone;
  if (ext) {
    chain = ext->chain(seq.ptr().get(), ext->label_of(*seq, -1), /*registered=*/false);
    ext->begin_call(chain, n);
    if (!checkpointed) segments = &ext->planned_segments(chain);
    for (int i = 0; i < n; ++i)
      if (!ext->named(chain, i))
        ext->name_block(chain, i, ext->label_of(*seq->ptr(static_cast<std::size_t>(i)), i));
  }
  static const std::vector<CheckpointExtension::MixedRun> kNoMixed;
  const std::vector<CheckpointExtension::MixedRun>& mixed =
      ext && !checkpointed ? ext->planned_mixed(chain) : kNoMixed;
  const bool profiling = ext && ext->profiling();
  ChainNesting nested;  // items that run a Sequential of their own are one block
  at::Tensor x = input;
  std::size_t next = 0, next_mixed = 0;
  for (int i = 0; i < n;) {
    if (next_mixed < mixed.size() && mixed[next_mixed].begin == i) {
      const CheckpointExtension::MixedRun& m = mixed[next_mixed++];
      for (int k = m.begin; k < m.end; ++k) ext->set_checkpointed(chain, k, m.run.recompute);
      CurrentBlock current(*ext, chain, m.begin);
      std::optional<Probe> probe;
      if (profiling) probe.emplace(*ext, chain, -1, x);
      x = mixed_items(seq, m, x, ext->recompute_clock());
      if (probe) probe->finish(x);
      i = m.end;
      continue;
    }
    if (next < segments->size() && (*segments)[next].begin == i) {
      const CheckpointSegment s = (*segments)[next++];
      if (!ext) {
        x = checkpoint_items(seq, s.begin, s.end, x, selective);
      } else {
        for (int k = s.begin; k < s.end; ++k) ext->set_checkpointed(chain, k, true);
        CurrentBlock current(*ext, chain, s.begin);
        std::optional<Probe> probe;
        if (profiling) probe.emplace(*ext, chain, -1, x);
        x = checkpoint_items(seq, s.begin, s.end, x, selective, ext->recompute_clock());
        if (probe) probe->finish(x);
      }
      i = s.end;
      continue;
    }
    auto& item = *(seq->begin() + i);
    ModuleScope range(*item.ptr());
    if (!ext) {
      x = item.forward(x);
    } else {
      ext->set_checkpointed(chain, i, false);
      CurrentBlock current(*ext, chain, i);
      std::optional<Probe> probe;
      if (profiling) probe.emplace(*ext, chain, i, x);
      x = item.forward(x);
      if (probe) probe->finish(x);
    }
    ++i;
  }
  if (ext) ext->end_call(chain, segments->empty());
  return x;
}

}  // namespace fathom::detail

namespace fathom {

namespace {
at::Tensor run_block(const std::shared_ptr<torch::nn::Module>& module,
                     const TensorFunction& forward, const at::Tensor& input) {
  using detail::ChainNesting;
  using detail::CheckpointExtension;
  CheckpointExtension* ext = CheckpointExtension::active();
  ModuleScope range(*module);
  if (!ext) return forward(input);
  if (!ChainNesting::outermost()) {
    if (const void* outer = ChainNesting::enclosing_block()) ext->found_blocks_inside(outer);
    return forward(input);
  }
  // A model whose blocks run through fathom: its blocks are the chain, it is a range.
  if (ext->holds_blocks(module.get())) return forward(input);
  static const char kRegisteredBlocks = 0;  // the key of the step's registered-blocks chain
  const int chain = ext->chain(&kRegisteredBlocks, "blocks", /*registered=*/true);
  const int index = ext->next_registered_block();
  if (index == 0) ext->begin_call(chain, 0);
  if (!ext->named(chain, index)) ext->name_block(chain, index, ext->label_of(*module, index));
  bool checkpointed = false;
  for (const CheckpointSegment& s : ext->planned_segments(chain))
    checkpointed = checkpointed || (s.begin <= index && index < s.end);
  const CheckpointExtension::MixedRun* mixed = nullptr;
  for (const CheckpointExtension::MixedRun& m : ext->planned_mixed(chain))
    if (m.begin == index) mixed = &m;
  if (mixed) checkpointed = mixed->run.recompute;
  ext->set_checkpointed(chain, index, checkpointed);
  detail::CurrentBlock current(*ext, chain, index);
  ChainNesting nested(module.get());
  std::optional<detail::Probe> probe;
  if (ext->profiling()) probe.emplace(*ext, chain, checkpointed || mixed ? -1 : index, input);
  at::Tensor y;
  if (mixed) {
    y = detail::run_mixed_unit(
        [forward, clock = ext->recompute_clock()](const at::Tensor& in) {
          detail::RecomputeTimer timer(clock);
          return forward(in);
        },
        input, mixed->run, {module});
  } else if (checkpointed) {
    y = checkpoint(
        [forward, clock = ext->recompute_clock()](const at::Tensor& in) {
          detail::RecomputeTimer timer(clock);
          return forward(in);
        },
        input, CheckpointOptions().module(module));
  } else {
    y = forward(input);
  }
  if (probe) probe->finish(y);
  return y;
}
}  // namespace

at::Tensor block(const std::shared_ptr<torch::nn::Module>& module, const TensorFunction& forward,
                 const at::Tensor& input) {
  if (!module) throw Error("fathom::block: the module is empty; pass the block's module holder");
  if (!forward) throw Error("fathom::block: the forward function is empty");
  // Under Auto's mixed precision a block that throws runs again in fp32 (amp.h).
  return detail::amp_region([&] { return run_block(module, forward, input); });
}

}  // namespace fathom
