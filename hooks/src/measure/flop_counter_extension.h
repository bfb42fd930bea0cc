#pragma once
// FLOPs per step as a session feature: in the first kFlopProfiledSteps steps of each epoch that
// complete, an op callback (op_flop_callback.h) counts the floating-point operations of the ops
// that ran, per phase, op and input type; the epoch's `flops` section gets them per step. The
// callback exists only inside those steps: it is registered at the step's begin and removed at
// its end, so every other step runs without it. Counted whether or not an NVTX tool listens.
// Options::count_flops(false) / FATHOM_COUNT_FLOPS=off: no callback at all, and the section says
// the count was turned off.
#include <fathom/options.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/session_extension.h"
#include "measure/op_flop_callback.h"

namespace fathom::detail {

// The steps counted: the first 3 of each epoch, the steps the checkpoint planner profiles too
// (CheckpointExtension's kProfiledSteps), so fathom's profiling costs fall on the same few steps.
// More than one, so that a first step that takes another path (a module built lazily, a
// first-step-only branch) is averaged with steady ones rather than taken for the run. A step that
// fails is not counted; the next one is.
inline constexpr std::int64_t kFlopProfiledSteps = 3;
inline constexpr const char* kFlopsOff =
    "turned off (Options::count_flops(false) or FATHOM_COUNT_FLOPS=off): fathom registers no op "
    "callback";

class FlopCounterExtension final : public SessionExtension {
 public:
  explicit FlopCounterExtension(const Options& options);
  ~FlopCounterExtension() override;

  // Whether the current step is being counted (tests, the overhead benchmark).
  bool counting() const noexcept { return callback_ != nullptr; }

  void on_epoch_begin(std::int64_t epoch) noexcept override;
  void on_step_begin(std::int64_t step) noexcept override;
  void on_phase_begin(Phase phase) noexcept override;
  void on_phase_end(Phase phase, bool aborted) noexcept override;
  void on_step_end(std::int64_t step, bool failed) noexcept override;
  void on_epoch_measured(EpochSummary& epoch, Environment& environment) noexcept override;

 private:
  bool enabled_;
  FlopTally tally_;  // the step being counted
  std::unique_ptr<OpFlopCallback> callback_;
  // The epoch so far: the counted steps' entries, summed.
  std::vector<FlopTally::Entry> epoch_entries_;
  std::vector<std::string> unfit_;
  std::vector<std::pair<std::string, std::int64_t>> uncounted_;  // calls over the counted steps
  std::int64_t profiled_steps_ = 0;
  bool taken_by_another_ = false;  // another session's callback was counting
};

}  // namespace fathom::detail
