#pragma once
// When Auto mode turns mixed precision on, and when it turns it back off. Torch-free: it sees
// only what each step produced (its loss, whether its gradients were finite, its time).
//
//   warming up --(warmup_steps fp32 losses)--> watching --(watch_steps within the trend,
//   and not slower)--> enabled
//   watching / enabled --(non-finite loss or gradients, drift beyond the fp32 trend,
//   slower steps)--> rolled back (for good; the report says why)
//   warming up --(no loss from the loop)--> not enabled
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
  int watch_steps = 30;     // mixed-precision steps compared with it before accepting
  double tolerance = 0.10;  // relative rise of the loss over the fp32 trend allowed
  int smooth_steps = 5;     // losses averaged for the drift check
  bool rollback_if_slower = true;
  double slower_margin = 0.05;  // slower means median step time above fp32's by this share
};

// What one finished step produced.
struct StepOutcome {
  std::int64_t step = 0;
  std::optional<double> loss;        // when the loop told fathom its loss
  bool nonfinite_gradients = false;  // the update was skipped on inf/NaN gradients
  bool grad_scaling = false;         // fp16 with a GradScaler: such skips are its calibration
  double step_ms = 0;                // host time of the step
};

class AutoAmpPolicy {
 public:
  explicit AutoAmpPolicy(AutoAmpOptions options = {});

  AmpStage stage() const noexcept { return stage_; }
  // Whether the next step runs with mixed precision.
  bool amp_on() const noexcept {
    return stage_ == AmpStage::Watching || stage_ == AmpStage::Enabled;
  }
  const AutoAmpOptions& options() const noexcept { return options_; }

  // Feeds one finished step; returns the event when the stage changed.
  std::optional<AmpEvent> observe(const StepOutcome& s);
  // Keeps mixed precision off for good, e.g. when fp16 needs a GradScaler the loop does not use.
  AmpEvent refuse(std::int64_t step, std::string reason);

  // What the checks compared, for the report (empty until known).
  std::optional<double> fp32_step_ms() const;
  std::optional<double> amp_step_ms() const;
  std::optional<double> fp32_loss_reference() const;
  std::optional<double> amp_loss() const;

 private:
  AmpEvent roll_back(std::int64_t step, std::string reason);

  AutoAmpOptions options_;
  AmpStage stage_ = AmpStage::WarmingUp;
  std::vector<LossPoint> fp32_losses_;
  std::vector<double> fp32_ms_;
  std::int64_t warmup_steps_seen_ = 0;
  std::optional<LossTrend> trend_;
  std::vector<double> amp_losses_;
  std::vector<double> amp_ms_;
  std::int64_t watched_ = 0;
};

}  // namespace fathom
