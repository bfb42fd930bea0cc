#pragma once
// When Auto mode turns mixed precision on, and when it turns it back off. Torch-free: it sees
// only what each step produced (its loss, whether its gradients were finite, its time).
//
//   warming up --(warmup_steps fp32 losses)--> watching --(watch_steps within the trend,
//   and not slower)--> enabled
//   watching / enabled --(non-finite loss or gradients, drift beyond the fp32 trend,
//   slower steps)--> rolled back (for good; the report says why)
//   warming up --(no loss from the loop)--> not enabled
//
// Step times measured minutes apart compare the load of the machine as much as the precision, so
// during the watch every fp32_probe_every-th step runs in fp32: the speed check compares steps of
// both precisions taken under the same conditions.
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
  int watch_steps = 30;     // steps watched before accepting (fp32 probes included)
  double tolerance = 0.10;  // relative rise of the loss over the fp32 trend allowed
  int smooth_steps = 5;     // losses averaged for the drift check
  bool rollback_if_slower = true;
  double slower_margin = 0.05;  // slower means median step time above fp32's by this share
  int fp32_probe_every = 4;     // during the watch, every n-th step runs fp32 (0: none)
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

  // What the checks compared, for the report (empty until known). fp32 step time: the watch's
  // probes when there were 3 or more, else the warm-up.
  std::optional<double> fp32_step_ms() const;
  std::optional<double> amp_step_ms() const;
  std::optional<double> fp32_loss_reference() const;
  std::optional<double> amp_loss() const;

 private:
  AmpEvent roll_back(std::int64_t step, std::string reason);
  std::string timing_note() const;

  AutoAmpOptions options_;
  AmpStage stage_ = AmpStage::WarmingUp;
  std::vector<LossPoint> fp32_losses_;
  std::vector<double> fp32_ms_;
  std::int64_t warmup_steps_seen_ = 0;
  std::optional<LossTrend> trend_;
  std::vector<double> amp_losses_;
  std::vector<double> amp_ms_;
  std::vector<double> probe_ms_;  // fp32 steps during the watch
  std::int64_t watched_ = 0;
};

}  // namespace fathom
