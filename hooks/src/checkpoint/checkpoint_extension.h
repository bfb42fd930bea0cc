#pragma once
// Activation checkpointing as a session feature. In the first kProfiledSteps steps of each epoch,
// the chains fathom runs (a Sequential through fathom::forward, the blocks of a step through
// fathom::block) are measured block by block: the bytes each saves for backward and its forward
// time (chain_runner.cpp). From those the planner (checkpoint_planner.h) picks what to recompute:
//
// - Suggest: at the epoch's end, when the peak passed the budget (Options::checkpoint_budget, or
//   90 % of device memory when none is set), the report lists the plan, its predicted peak and
//   recompute time, and the code that applies it.
// - Auto: the same decision at the end of each profiled step, and the plan is applied from the
//   next step on.
// - An out-of-memory error inside fathom::guarded_step is recorded with its phase, block and peak;
//   in Auto mode the plan is tightened and the step retried once (guarded_step.cpp).
//
// The joint plan (activation_plan.h, joint_planning.cpp): the profiled steps also measure each
// block's op groups (unit_measure.h), and wherever a block plan is made the joint
// keep/recompute/offload plan is made for the same chain and budget: Suggest reports it (the
// per-module table and the memory.activation_plan finding), Auto runs what this build can of it
// (activation_applier.h) in place of the block plan, and the profiled steps after measure it.
//
// Budgets: on a GPU the budget bounds the allocator's peak in a step, and the activation budget
// is what remains after the memory that does not depend on the plan (the measured peak minus the
// predicted activation peak). On a CPU, which has no allocator statistics, the budget bounds the
// activation bytes themselves (a fraction is of the activation bytes without checkpointing).
#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <fathom/checkpoint_planner.h>
#include <fathom/gpu_analysis.h>
#include <fathom/module_report.h>
#include <fathom/options.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "checkpoint/mixed_unit.h"
#include "checkpoint/unit_measure.h"
#include "framework/session_extension.h"

namespace c10 {
class OutOfMemoryError;
}
namespace torch::nn {
class Module;
}

namespace fathom::detail {

inline constexpr std::int64_t kProfiledSteps = 3;

// The host link's bandwidth each way (bytes/s) from an epoch's measured copies: the slower of
// host-to-device and device-to-host; 0 when neither was measured (joint_planning.cpp).
double measured_link_bytes_per_second(const TransferResult& transfers);
// Why activation bytes are missing when the user turned the autograd-engine hook off.
inline constexpr const char* kAutogradHookOff =
    "turned off (Options::autograd_hook(false) or FATHOM_AUTOGRAD_HOOK=off): fathom leaves "
    "LibTorch's autograd engine as it is";

class CheckpointExtension final : public SessionExtension {
 public:
  CheckpointExtension(const Options& options, std::optional<c10::Device> device,
                      std::optional<std::int64_t> device_memory_bytes);
  ~CheckpointExtension() override;

  // The extension of the session whose epoch or step scope is open on this thread, or null
  // (fathom off, or outside every epoch).
  static CheckpointExtension* active() noexcept;

  // Learns module names for the report (Session::watch).
  void on_watch_model(const torch::nn::Module& model, const std::string& name) override;
  std::string label_of(const torch::nn::Module& module, int index_in_parent) const;

  // --- chains (chain_runner.cpp) ----------------------------------------------------------------
  // A chain's index, registered on first sight. registered: the step's fathom::block calls.
  int chain(const void* key, const std::string& label, bool registered);
  const std::string& chain_label(int chain) const { return chains_[chain].label; }
  // The segments Auto's plan checkpoints in this chain (empty when none is in force).
  const std::vector<CheckpointSegment>& planned_segments(int chain) const {
    return chains_[chain].applied;
  }
  // A unit Auto's joint plan keeps in part: the chain's blocks [begin, end), run as mixed_unit.h
  // says.
  struct MixedRun {
    int begin = 0, end = 0;
    MixedUnitRun run;
  };
  const std::vector<MixedRun>& planned_mixed(int chain) const { return chains_[chain].mixed; }
  // This step measures blocks (profiled steps, when saved tensors can be seen). The first chain
  // that asks in a profiled step installs the autograd-engine hook (saved_tensor_meter.h): a
  // session that runs no chain, or runs with Options::autograd_hook(false), never replaces
  // LibTorch's engine.
  bool profiling() noexcept { return profiling_ && capture_ready(); }
  std::optional<c10::Device> device() const noexcept { return device_; }
  // A chain call begins (blocks: its length, 0 when not known ahead) and ends (plain: nothing
  // in it was checkpointed).
  void begin_call(int chain, int blocks);
  void end_call(int chain, bool plain);
  // Where a checkpointed part adds the host time of its recompute in backward.
  const std::shared_ptr<std::atomic<std::int64_t>>& recompute_clock() const noexcept {
    return recompute_ns_;
  }
  // The next index in the step's registered-blocks chain.
  int next_registered_block() noexcept { return registered_next_++; }
  // Storages saved in this chain call so far (profiled calls), with their bytes: a storage two
  // blocks save counts once, and their sum is what the call keeps for backward.
  std::unordered_map<const void*, std::int64_t>& saved_in_call(int chain) {
    return chains_[chain].saved;
  }
  // One block's measurement in a profiled call; timing: its device events (GPU), or none.
  struct DeviceTiming {
    c10::Event start, stop;
  };
  void add_sample(int chain, int index, const ChainBlock& block,
                  std::unique_ptr<DeviceTiming> timing, MeasuredUnit unit = {});
  // Names block `index` of the chain (once: names do not change) and marks whether it runs
  // checkpointed in this call.
  bool named(int chain, int index) const;
  void name_block(int chain, int index, std::string name);
  void set_checkpointed(int chain, int index, bool checkpointed);
  // A registered block whose forward runs blocks or chains of its own (a transformer's layers,
  // a ResNet's stages, inside fathom::forward(model, x)): measured whole until the next profiled
  // step begins, then a range only, so that its blocks are measured and planned one by one
  // (issue 24: the model was the one block the planner had, with nothing to split).
  void found_blocks_inside(const void* block) noexcept;
  bool holds_blocks(const void* block) const noexcept { return holding_blocks_.count(block) > 0; }
  // The block running now, for the out-of-memory diagnosis. An exception leaves it set.
  void set_current_block(int chain, int index) noexcept { current_ = {chain, index}; }
  void clear_current_block() noexcept { current_ = {-1, -1}; }

  // --- out-of-memory guard (guarded_step.cpp)
  // -----------------------------------------------------
  bool auto_mode() const noexcept { return options_.mode() == Mode::Auto; }
  bool optimizer_started() const noexcept { return optimizer_started_; }
  // Records the error with what fathom knows of the step; returns the event's index.
  std::size_t record_out_of_memory(const std::exception& error);
  OutOfMemoryEvent& out_of_memory_event(std::size_t index) { return out_of_memory_.at(index); }
  // Plans every chain tighter; returns what changed ("" when nothing could be tightened).
  std::string tighten() noexcept;
  // Returns cached device blocks to the driver.
  void release_cached_memory() noexcept;

  // --- session lifecycle
  // -----------------------------------------------------------------------------
  void on_epoch_begin(std::int64_t epoch) noexcept override;
  void on_step_begin(std::int64_t step) noexcept override;
  void on_phase_begin(Phase phase) noexcept override;
  void on_phase_end(Phase phase, bool aborted) noexcept override;
  void on_step_end(std::int64_t step, bool failed) noexcept override;
  // The footprint's activation bytes and checkpointing flag, before the advisor sizes the model.
  void on_footprint(FootprintParts& parts, Environment& environment) noexcept override;
  // The per-module section with Suggest's plans (the advisor makes their findings).
  void on_epoch_measured(EpochSummary& epoch, Environment& environment) noexcept override;

 private:
  struct BlockStats {
    std::string name;
    ChainBlock last;  // bytes of the latest plain profiled call
    bool measured = false;
    std::int64_t calls = 0;  // profiled calls this epoch
    double ms_total = 0;
    double device_ms_total = 0;
    std::int64_t device_calls = 0;
    bool checkpointed = false;  // in the latest call
    MeasuredUnit unit;          // op groups of the latest plain profiled call (none: not measured)
  };
  struct Chain {
    const void* key = nullptr;
    std::string label;
    bool registered = false;
    std::vector<BlockStats> blocks;
    int size = 0;  // blocks in the latest call
    bool seen_this_epoch = false;
    bool measured = false;                                // a whole plain call was profiled
    std::unordered_map<const void*, std::int64_t> saved;  // in the current call
    bool called_this_step = false;
    bool checkpointed_this_step = false;
    std::vector<CheckpointSegment> applied;    // Auto's plan in force (block indices)
    std::vector<MixedRun> mixed;               // ... and its units kept in part
    std::optional<CheckpointPlanReport> plan;  // the latest plan, applied or suggested
    std::optional<std::int64_t> measured_with_plan;
    std::optional<ActivationPlanReport> joint;  // the latest joint plan, applied or suggested
  };
  struct PendingTiming {
    int chain, block;
    std::unique_ptr<DeviceTiming> events;
  };
  // The chain's measured blocks, as the planner reads them; fused: views and in-place blocks
  // merged.
  std::vector<ChainBlock> chain_blocks(const Chain& c) const;
  // The units both planners plan: registered blocks one by one, as the loop calls them; a
  // Sequential's views and in-place items merged into the item before them.
  FusedChain fused_chain(const Chain& c) const;
  // A chain's plans under one budget: the block plan, and the joint one where every block's op
  // groups were measured (its applied segments then are what Auto runs, and block is their report).
  struct ChainPlan {
    int chain = -1;
    CheckpointPlanReport block;
    std::optional<ActivationPlanReport> joint;
    std::vector<MixedRun> mixed;  // the joint plan's units kept in part, when applied
  };
  // Plans for the chains measured so far, so that together they fit: step_peak (GPU) and the
  // budget decide the activation target. Empty: no pressure, no plan.
  std::vector<ChainPlan> choose_plans(std::optional<std::int64_t> step_peak, bool apply) const;
  CheckpointPlanReport plan_chain(const Chain& c, std::int64_t activation_budget,
                                  const std::string& budget_text, bool apply) const;
  // The joint plan (joint_planning.cpp) for the same budget; replaces block with the report of
  // the whole-unit segments it runs when apply. nullopt: some block's groups were not measured.
  // mixed_runs gets the units it keeps in part, when apply.
  std::optional<ActivationPlanReport> plan_joint(const Chain& c, std::int64_t activation_budget,
                                                 const std::string& budget_text, bool apply,
                                                 CheckpointPlanReport& block,
                                                 std::vector<MixedRun>* mixed_runs) const;
  std::string plan_code(const Chain& c, const std::vector<CheckpointSegment>& segments) const;
  void resolve_timings(bool wait) noexcept;
  // The epoch's ModuleReport: measurements, plans (Suggest plans them here), out-of-memory events.
  void write_section(EpochSummary& epoch, Environment& environment) noexcept;
  bool capture_ready() noexcept;
  std::optional<std::int64_t> allocator_peak() const noexcept;

  Options options_;
  std::optional<c10::Device> device_;
  std::optional<std::int64_t> device_memory_bytes_;
  // Saved-tensor capture: not needed yet, installed, turned off by the user, or unavailable.
  enum class Capture { NotYet, On, Off, Unavailable };
  Capture capture_ = Capture::NotYet;
  std::string capture_unavailable_why_;
  std::unordered_map<const void*, std::string> names_;
  std::vector<Chain> chains_;
  std::deque<PendingTiming> timings_;
  std::unordered_set<const void*> holding_blocks_;  // ranges only: their blocks are the chain
  std::unordered_set<const void*> found_holding_;   // found so, ranges from the next profiled step

  // The current step.
  bool profiling_ = false;
  int registered_next_ = 0;
  bool optimizer_started_ = false;
  std::optional<Phase> phase_;
  std::optional<std::int64_t> step_peak_;
  std::int64_t step_ = 0;
  std::pair<int, int> current_{-1, -1};  // chain, block

  // The epoch.
  std::int64_t profiled_steps_ = 0;
  // Host-device copy bandwidth each way (bytes/s) from the latest epoch's measured copies; 0 on
  // a CPU, or before any was measured, so the joint plan offloads nothing.
  double link_bytes_per_second_ = 0;
  // Host time the chains' checkpointed parts spent recomputing in backward (chain_runner.cpp adds
  // to it, from whichever thread runs backward; shared: a graph may outlive the session), and per
  // step with a plan in force, for the joint plan's measured extra time.
  std::shared_ptr<std::atomic<std::int64_t>> recompute_ns_ =
      std::make_shared<std::atomic<std::int64_t>>(0);
  double planned_recompute_ms_ = 0;
  std::int64_t planned_steps_ = 0;
  bool plan_in_force_ = false;
  std::optional<std::int64_t> epoch_peak_;
  std::vector<OutOfMemoryEvent> out_of_memory_;
};

}  // namespace fathom::detail
