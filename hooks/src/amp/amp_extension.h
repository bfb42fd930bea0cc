#pragma once
// Mixed precision as a session feature: autocast around each forward phase when it is on, the
// GradScaler behind step.scaled() / step.apply(), the Auto policy (amp_policy.h) fed at each
// step's end, and the report's mixed-precision section (from which the advisor makes the findings).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <fathom/amp.h>
#include <fathom/autocast.h>
#include <fathom/options.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "advise/amp_advice.h"
#include "framework/session_extension.h"

namespace fathom::detail {

class SessionState;

// The bf16 units of this host (cpu_bf16_units()) that this process's kernels may use, with the
// ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) and ATen capability caps applied; limited_by gets the
// cap that took units away (usable_cpu_bf16_units(), amp_hardware.h).
std::vector<std::string> cpu_bf16_units_here(std::string* limited_by = nullptr);

class AmpExtension final : public SessionExtension {
 public:
  // device: the session's CUDA device (nullopt on a CPU-only run).
  AmpExtension(Mode mode, std::optional<c10::Device> device);

  void configure(const AmpOptions& options);
  GradScaler* scaler() noexcept { return scaler_ ? &*scaler_ : nullptr; }
  // Whether the current step runs its forward phases under autocast.
  bool amp_this_step() const noexcept { return amp_this_step_; }

  // StepScope's mixed-precision calls.
  at::Tensor scaled(const at::Tensor& loss);
  void loss(const at::Tensor& loss);
  bool apply(torch::optim::Optimizer& optimizer);
  void unscale(torch::optim::Optimizer& optimizer);

  // guarded_step's call after the step it ran threw. When that step failed under mixed precision
  // or as one of Auto's fp32 comparison steps (mixed precision is then off for good), adds the
  // error to the report's event and returns true when the step may run again, in fp32: its
  // optimizer phase had not begun. False: not a mixed-precision failure, or not safe to retry.
  bool recover_failed_step(const std::string& what);
  // amp_region_failed's work (amp.h): a region of this step's forward threw under autocast. Rolls
  // mixed precision back for good, turns the open forward phase to fp32 autocast and returns true
  // (the region may run again); false when the step was not running under Auto's autocast.
  bool recover_failed_region(const char* what) noexcept;
  // What can be run again if 16 bits fail (Auto tries mixed precision only where a failure can be
  // undone): a region of the forward (amp_region: fathom::forward) runs, or the step runs inside
  // fathom::guarded_step.
  void note_region() noexcept { region_this_step_ = true; }
  void note_guarded_step() noexcept { guarded_this_step_ = true; }

  void on_epoch_begin(std::int64_t epoch) noexcept override;
  void on_step_begin(std::int64_t step) noexcept override;
  void on_phase_begin(Phase phase) noexcept override;
  void on_phase_end(Phase phase, bool aborted) noexcept override;
  void on_step_end(std::int64_t step, bool failed) noexcept override;
  // The footprint's mixed-precision flag, for the advisor's sizing of the model.
  void on_footprint(FootprintParts& parts, Environment& environment) noexcept override;
  // Writes the epoch's mixed-precision section before the advisor reads it.
  void on_epoch_measured(EpochSummary& epoch, Environment& environment) noexcept override;

 private:
  bool auto_policy() const noexcept {
    return mode_ == Mode::Auto && options_.when() == AmpOptions::When::Mode;
  }
  // Picks the device type and dtype, and makes the GradScaler for fp16. False (with the reason)
  // when mixed precision cannot run in this loop.
  bool prepare(std::string& why_not);
  void record(AmpEvent event);
  // " (avx512_bf16)", " (compute capability 8.0)": the units a trial runs on, for its event.
  std::string tried_on() const;
  void count_phase(Phase phase);
  void note_scale();
  bool check_finite_gradients(torch::optim::Optimizer& optimizer);

  Mode mode_;
  AmpOptions options_;
  AmpDeviceFacts device_;
  std::optional<c10::Device> session_device_;
  AutoAmpPolicy policy_;

  // Resolved when mixed precision first turns on.
  std::optional<c10::DeviceType> device_type_;
  std::optional<c10::ScalarType> dtype_;
  std::optional<GradScaler> scaler_;
  bool always_failed_ = false;  // When::Always could not start (the report says why)

  // What the loop does: fp16 needs its loss scaled and its optimizer stepped by fathom.
  bool loop_scales_ = false;
  bool loop_applies_ = false;
  std::optional<c10::DeviceType> loss_device_type_;

  // The current step.
  std::int64_t global_step_ = 0;
  std::int64_t step_begin_ns_ = 0;
  bool amp_this_step_ = false;
  // An fp32 step after a 16-bit one: its forward runs under fp32 autocast, which casts up the
  // 16-bit tensors earlier steps left behind (enter_fp32_autocast).
  bool upcast_this_step_ = false;
  bool ran_low_precision_ = false;
  bool comparison_this_step_ = false;  // one of the watch's fp32 probes
  bool forward_this_step_ = false;     // a forward phase began
  bool region_this_step_ = false;      // ... ran a region fathom can run again (amp_region)
  bool guarded_this_step_ = false;     // the step runs inside fathom::guarded_step
  // The first fp32 step whose forward ran outside both: a 16-bit failure there would end the loop.
  std::optional<std::int64_t> unguarded_step_;
  bool optimizer_began_ = false;
  // The event of the step that just failed under mixed precision, until guarded_step explains it.
  std::optional<std::size_t> pending_failure_;
  bool pending_failure_optimizer_began_ = false;
  bool scaled_this_step_ = false;
  bool nonfinite_this_step_ = false;
  at::Tensor loss_;
  std::vector<AutocastState> saved_;  // one per open forward phase
  std::optional<double> last_scale_;

  MixedPrecisionSummary epoch_;
};

// The session's AMP extension; null without a session, or with one that built none.
AmpExtension* amp_of(SessionState* state) noexcept;

}  // namespace fathom::detail
