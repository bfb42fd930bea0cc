#pragma once
// The per-module section of an epoch: what each block of a chain saves for backward and how long
// its forward takes, the checkpoint plan fathom made from that, and the out-of-memory errors a
// step met. Filled by the checkpoint extension (hooks/src/checkpoint/checkpoint_extension.cpp).
#include <fathom/activation_plan.h>
#include <fathom/checkpoint_plan.h>
#include <fathom/phase.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fathom {

// One block of a chain (a Sequential item, or a block run through fathom::block), as measured
// in the profiled steps of the epoch with nothing checkpointed. The byte fields are those of
// ChainBlock (checkpoint_plan.h), so a report can be planned again offline.
struct ModuleMeasurement {
  std::string chain;                   // "features (Sequential)", or "blocks" for registered blocks
  std::string name;                    // "features.3 (Conv2d)", or the registered block's name
  std::int64_t calls = 0;              // profiled forward calls
  std::int64_t saved_bytes = 0;        // saved for backward by this block (storage-deduplicated)
  std::int64_t own_bytes = 0;          // of which neither its input nor its output
  std::int64_t input_saved_bytes = 0;  // of which its input
  std::int64_t output_saved_bytes = 0;  // of which its output
  std::int64_t input_bytes = 0;
  std::int64_t output_bytes = 0;
  bool aliases_input = false;               // its output shares storage with its input
  double forward_ms = 0;                    // host clock, mean per call
  std::optional<double> forward_device_ms;  // device events, mean per call (GPU)
  bool checkpointed = false;                // run inside fathom::checkpoint at the epoch's end
};

// The planner's view of a measured block, e.g. to plan again from a saved report.
inline ChainBlock chain_block(const ModuleMeasurement& m) {
  ChainBlock b;
  b.name = m.name;
  b.own_bytes = m.own_bytes;
  b.input_saved_bytes = m.input_saved_bytes;
  b.output_saved_bytes = m.output_saved_bytes;
  b.input_bytes = m.input_bytes;
  b.output_bytes = m.output_bytes;
  b.aliases_input = m.aliases_input;
  b.forward_ms = m.forward_ms;
  return b;
}

struct CheckpointPlanReport {
  std::string chain;
  std::string budget;             // as set: "12.00 GiB", "80 % of device memory"
  std::int64_t budget_bytes = 0;  // activation bytes the planner was given
  std::int64_t unconstrained_peak_bytes = 0;
  std::int64_t predicted_peak_bytes = 0;
  std::int64_t min_feasible_budget_bytes = 0;
  double forward_ms = 0;                    // the chain's forward, once
  double recompute_ms = 0;                  // recomputed per step
  std::optional<double> step_overhead;      // recompute_ms over the measured mean step time
  std::int64_t predicted_stored_bytes = 0;  // saved after the forward, by the model
  std::optional<std::int64_t> measured_stored_bytes;  // measured in a profiled step with the plan
  bool feasible = false;
  bool applied = false;                     // Auto mode ran the steps after with this plan
  std::vector<CheckpointSegment> segments;  // module indices of the chain, [begin, end)
  std::string message;
  std::string code;  // how to apply it by hand
};

// One unit of a chain under a joint keep/recompute/offload plan (activation_plan.h): what the
// plan does with its saved tensors, and what the model predicts against what a profiled step
// that ran the plan measured (null until one has).
struct ActivationModuleRow {
  std::string name;
  std::int64_t kept_bytes = 0;
  std::int64_t recomputed_bytes = 0;
  std::int64_t offloaded_bytes = 0;
  std::vector<std::string> recomputed;  // its groups' names
  std::vector<std::string> offloaded;
  std::int64_t predicted_peak_bytes = 0;  // activations held at its backward
  std::optional<std::int64_t> measured_peak_bytes;
  double predicted_extra_ms = 0;  // its recompute and exposed transfer per step
  std::optional<double> measured_extra_ms;
};

// A joint plan for one chain, suggested, or applied by Auto mode.
struct ActivationPlanReport {
  std::string chain;
  std::string budget;                         // as set: "12.00 GiB", "33 % of the activations"
  std::int64_t budget_bytes = 0;              // activation bytes the planner was given
  std::int64_t unconstrained_peak_bytes = 0;  // everything kept
  std::int64_t min_feasible_budget_bytes = 0;
  std::int64_t predicted_peak_bytes = 0;
  std::optional<std::int64_t> measured_peak_bytes;
  std::int64_t predicted_stored_bytes = 0;  // held after the forward
  double forward_ms = 0;                    // the chain's forward, once
  double predicted_recompute_ms = 0;        // per step
  double predicted_transfer_ms = 0;         // transfer time not hidden behind compute, per step
  std::optional<double> measured_extra_ms;  // a step with the plan against one without
  std::optional<double> recompute_flop_fraction;  // of the forward's FLOPs (null: not counted)
  double link_bytes_per_second = 0;               // 0: not measured, nothing offloaded
  bool feasible = false;
  bool exact = true;     // false: the planner thinned its fronts (a very long chain)
  bool applied = false;  // Auto mode ran the steps after with this plan
  std::vector<ActivationModuleRow> modules;
  std::string message;
  std::string code;  // how to apply it by hand
  double predicted_extra_ms() const { return predicted_recompute_ms + predicted_transfer_ms; }
};

struct OutOfMemoryEvent {
  std::int64_t step = 0;
  Phase phase = Phase::Forward;
  std::string module;  // the block running when memory ran out ("" when none was)
  std::optional<std::int64_t> peak_allocated_bytes;  // the allocator's run peak then (GPU)
  std::optional<std::int64_t> device_memory_bytes;
  std::string error;  // the error's first line
  bool retried = false;
  bool recovered = false;  // the retry succeeded
  std::string action;      // what fathom did
};

struct ModuleReport {
  std::string source;  // how saved bytes were measured
  std::int64_t profiled_steps = 0;
  std::vector<ModuleMeasurement> modules;
  std::vector<CheckpointPlanReport> plans;
  std::vector<ActivationPlanReport> activation_plans;  // joint keep/recompute/offload plans
  std::vector<OutOfMemoryEvent> out_of_memory;
};

}  // namespace fathom
