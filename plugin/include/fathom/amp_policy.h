#pragma once
// When Auto mode turns mixed precision on, and when it turns it back off. Torch-free: it sees
// only what each step produced (its loss, whether its gradients were finite, its time).
//
//   warming up --(warmup_steps fp32 losses)--> watching --(the watch window's rank tests find
//   neither a drift nor slower steps)--> enabled
//   watching / enabled --(non-finite loss or gradients, a step that failed under mixed
//   precision)--> rolled back at once (for good; the report says why)
//   watching --(mixed-precision steps slower than fp32 by abort_ratio)--> rolled back at once
//   watching --(a drift, or steps not shown faster, at the window's end)--> rolled back
//   warming up --(no loss from the loop)--> not enabled
//
// Step times measured minutes apart compare the load of the machine as much as the precision, so
// during the watch every fp32_probe_every-th step runs in fp32: the speed check compares steps of
// both precisions taken under the same conditions.
//
// Keep or roll back is decided over the whole watch window by one-sided Mann-Whitney rank tests
// (analyze/mann_whitney.h), never by one step: the mixed-precision losses' excess over the fp32
// trend plus `tolerance` against the fp32 losses' residuals around it (the warm-up's and the
// probes'), and the fp32 step times times (1 - faster_margin) against the mixed-precision step
// times. The loss test rolls back at p < significance; the speed test keeps mixed precision only
// at p < 0.05, with the median ratio at most 1 - faster_margin: a change is kept because
// it was shown to pay, not because it was not shown to hurt. A change that makes steps slower by
// more than abort_ratio (the fastest of at least two mixed-precision steps after the first, which
// pays for cast caches, against the watch's first fp32 probes) rolls back at once: no test is
// needed to see a 3x slowdown, and waiting for the window would cost the loop that many slow steps.
// Before the window ends, a drift rolls back early only when the median of the last smooth_steps
// losses is beyond the trend's limit (tolerance plus 3 noise) and the rank test over the window so
// far agrees. The event's detail states the medians, the margins and the p-values.
#include <fathom/loss_trend.h>
#include <fathom/mixed_precision.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

enum class AmpStage { WarmingUp, Watching, Enabled, RolledBack, NotEnabled };
// "warming_up", "watching", "enabled", "rolled_back", "fp32"
std::string_view amp_stage_name(AmpStage s) noexcept;

struct AutoAmpOptions {
  int warmup_steps = 20;    // fp32 steps with a loss that set the trend
  int watch_steps = 12;     // steps watched before accepting (fp32 probes included): a short trial
  double tolerance = 0.10;  // relative rise of the loss over the fp32 trend allowed
  int smooth_steps = 5;     // the early drift check's median is over this many losses
  // Roll back unless the steps are faster by faster_margin (false: keep whatever the speed).
  bool rollback_if_slower = true;
  double faster_margin = 0.05;  // kept only when steps are at least this share faster than fp32's
  double abort_ratio = 1.5;     // steps this many times fp32's roll back at once, not at a test
  // Try only where the device runs 16 bits on units built for it (amp_hardware.h): Tensor Cores,
  // a CPU's AMX or AVX-512 BF16 within ONEDNN_MAX_CPU_ISA and ATEN_CPU_CAPABILITY. Elsewhere 16
  // bits are emulated (slower) and some ops have no 16-bit kernel at all.
  bool native_only = true;
  int fp32_probe_every = 4;    // during the watch, every n-th step runs fp32 (0: none)
  double significance = 0.01;  // the rank tests roll back at one-sided p below this
};

// What one finished step produced.
struct StepOutcome {
  std::int64_t step = 0;
  std::optional<double> loss;        // when the loop told fathom its loss
  bool nonfinite_gradients = false;  // the update was skipped on inf/NaN gradients
  bool grad_scaling = false;         // fp16 with a GradScaler: such skips are its calibration
  double step_ms = 0;                // host time of the step
  bool low_precision = false;        // the step ran under autocast (what amp_on() said)
};

class AutoAmpPolicy {
 public:
  explicit AutoAmpPolicy(AutoAmpOptions options = {});

  AmpStage stage() const noexcept { return stage_; }
  // Whether the next step runs with mixed precision (false for the watch's fp32 probes).
  bool amp_on() const noexcept;
  const AutoAmpOptions& options() const noexcept { return options_; }

  // Feeds one finished step; returns the event when the stage changed.
  std::optional<AmpEvent> observe(const StepOutcome& s);
  // Keeps mixed precision off for good, e.g. when fp16 needs a GradScaler the loop does not use.
  AmpEvent refuse(std::int64_t step, std::string reason);
  // A step that ran under mixed precision, or a watch's fp32 comparison step, failed (threw):
  // mixed precision goes off for good, whatever the stage (rolled back once it had run).
  AmpEvent fail(std::int64_t step, std::string reason);
  // Whether the step now running is one of the watch's fp32 comparison steps.
  bool comparison_step() const noexcept { return stage_ == AmpStage::Watching && !amp_on(); }

  // What the checks compared, for the report (empty until known). fp32 step time: the watch's
  // probes when there were 3 or more, else the warm-up.
  std::optional<double> fp32_step_ms() const;
  std::optional<double> amp_step_ms() const;
  std::optional<double> fp32_loss_reference() const;
  std::optional<double> amp_loss() const;

 private:
  AmpEvent roll_back(std::int64_t step, std::string reason);
  std::string timing_note() const;
  // The watch's rank tests: whether to roll back, and the evidence (medians, margins, p).
  struct Verdict {
    bool roll_back = false;
    std::string evidence;
  };
  Verdict loss_verdict() const;
  Verdict speed_verdict() const;
  std::optional<std::string> early_drift(std::int64_t step) const;
  std::optional<std::string> far_slower() const;
  std::vector<double> fp32_loss_residuals() const;

  AutoAmpOptions options_;
  AmpStage stage_ = AmpStage::WarmingUp;
  std::vector<LossPoint> fp32_losses_;
  std::vector<double> fp32_ms_;
  std::int64_t warmup_steps_seen_ = 0;
  std::optional<LossTrend> trend_;
  std::vector<double> amp_losses_;
  std::vector<double> amp_excess_;       // loss - (trend + tolerance) at its step
  std::vector<double> probe_residuals_;  // fp32 probe losses - trend at their step
  std::vector<double> amp_ms_;
  std::vector<double> probe_ms_;  // fp32 steps during the watch
  std::int64_t watched_ = 0;
};

}  // namespace fathom
