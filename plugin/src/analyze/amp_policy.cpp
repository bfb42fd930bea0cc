#include <fathom/amp_policy.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analyze/mann_whitney.h"

namespace fathom {
namespace {

// The first steps of a window pay for allocations and cast caches: leave them out of the timing.
std::vector<double> steady(const std::vector<double>& ms) {
  const std::size_t skip = ms.size() > 4 ? 1 : 0;
  return std::vector<double>(ms.begin() + static_cast<std::ptrdiff_t>(skip), ms.end());
}

std::optional<double> steady_median(const std::vector<double>& ms) {
  if (ms.empty()) return std::nullopt;
  return median(steady(ms));
}

// Each rank test needs this many values a side before it may decide anything.
constexpr std::size_t kMinEach = 3;
// The speed test's one-sided p below which a change is shown faster. A 12-step trial holds 3 fp32
// probes: p < 0.01 would need every mixed-precision step below every probe (issue 24: a ResNet's
// bf16 steps at 0.70x fp32's, p = 0.016, were rolled back); the 5 % margin on the median keeps a
// change that only noise made look faster out.
constexpr double kFasterSignificance = 0.05;

}  // namespace

std::string_view amp_stage_name(AmpStage s) noexcept {
  switch (s) {
    case AmpStage::WarmingUp:
      return "warming_up";
    case AmpStage::Watching:
      return "watching";
    case AmpStage::Enabled:
      return "enabled";
    case AmpStage::RolledBack:
      return "rolled_back";
    case AmpStage::NotEnabled:
      return "fp32";
  }
  return "fp32";
}

std::string_view amp_event_kind_name(AmpEventKind k) noexcept {
  switch (k) {
    case AmpEventKind::Enabled:
      return "enabled";
    case AmpEventKind::Accepted:
      return "accepted";
    case AmpEventKind::RolledBack:
      return "rolled_back";
    case AmpEventKind::NotEnabled:
      return "not_enabled";
    case AmpEventKind::WarmupRestarted:
      return "warmup_restarted";
  }
  return "enabled";
}

std::optional<AmpEventKind> amp_event_kind_from_name(std::string_view name) noexcept {
  for (AmpEventKind k : {AmpEventKind::Enabled, AmpEventKind::Accepted, AmpEventKind::RolledBack,
                         AmpEventKind::NotEnabled, AmpEventKind::WarmupRestarted})
    if (amp_event_kind_name(k) == name) return k;
  return std::nullopt;
}

AutoAmpPolicy::AutoAmpPolicy(AutoAmpOptions options) : options_(options) {
  options_.warmup_steps =
      std::max(options_.warmup_steps, 3);  // a line needs 3 points to show noise
  options_.watch_steps = std::max(options_.watch_steps, 1);
  options_.smooth_steps = std::max(options_.smooth_steps, 1);
  options_.abort_ratio = std::max(options_.abort_ratio, 1.0);
}

AmpEvent AutoAmpPolicy::roll_back(std::int64_t step, std::string reason) {
  stage_ = AmpStage::RolledBack;
  return AmpEvent{step, AmpEventKind::RolledBack, std::move(reason)};
}

AmpEvent AutoAmpPolicy::fail(std::int64_t step, std::string reason) {
  const bool ran = stage_ == AmpStage::Watching || stage_ == AmpStage::Enabled;
  stage_ = ran ? AmpStage::RolledBack : AmpStage::NotEnabled;
  return AmpEvent{step, ran ? AmpEventKind::RolledBack : AmpEventKind::NotEnabled,
                  std::move(reason)};
}

AmpEvent AutoAmpPolicy::refuse(std::int64_t step, std::string reason) {
  stage_ = AmpStage::NotEnabled;
  return AmpEvent{step, AmpEventKind::NotEnabled, std::move(reason)};
}

std::string AutoAmpPolicy::timing_note() const {
  if (probe_ms_.size() >= 3)
    return fmt::format("; fp32 from {} steps interleaved with the watch", probe_ms_.size());
  return "; fp32 from the warm-up";
}

bool AutoAmpPolicy::amp_on() const noexcept {
  if (stage_ == AmpStage::Enabled) return true;
  if (stage_ != AmpStage::Watching) return false;
  const int every = options_.fp32_probe_every;
  return every <= 0 || watched_ % every != every - 1;
}

std::optional<AmpEvent> AutoAmpPolicy::observe(const StepOutcome& s) {
  const bool bad_loss = s.loss && !std::isfinite(*s.loss);
  // With a GradScaler, inf gradients are how the scale finds its level; without one they are a
  // fault.
  const bool bad_gradients = s.nonfinite_gradients && !s.grad_scaling;
  switch (stage_) {
    case AmpStage::WarmingUp: {
      ++warmup_steps_seen_;
      if (bad_loss) {
        fp32_losses_.clear();
        fp32_ms_.clear();
        return AmpEvent{s.step, AmpEventKind::WarmupRestarted,
                        "the fp32 loss was not finite; the warm-up starts again"};
      }
      if (s.loss) {
        fp32_losses_.push_back({s.step, *s.loss});
        fp32_ms_.push_back(s.step_ms);
      }
      if (fp32_losses_.empty() && warmup_steps_seen_ >= options_.warmup_steps) {
        return refuse(
            s.step,
            "the training loop does not tell fathom its loss, so a drift could not be seen: "
            "call step.loss(loss) or use step.scaled(loss).backward()");
      }
      if (static_cast<int>(fp32_losses_.size()) < options_.warmup_steps) return std::nullopt;
      trend_ = LossTrend::fit(fp32_losses_);
      if (!trend_) return refuse(s.step, "the fp32 losses of the warm-up do not give a trend");
      stage_ = AmpStage::Watching;
      return AmpEvent{
          s.step, AmpEventKind::Enabled,
          fmt::format("after {} fp32 steps (loss trend at {:.4g}, noise {:.3g}); watching the "
                      "next {} steps",
                      fp32_losses_.size(), trend_->level(), trend_->noise(), options_.watch_steps)};
    }
    case AmpStage::Watching: {
      if (bad_loss)
        return roll_back(s.step, fmt::format("the loss became {} under mixed precision", *s.loss));
      if (bad_gradients)
        return roll_back(s.step, "the gradients held inf or NaN under mixed precision");
      if (!s.low_precision) {
        probe_ms_.push_back(s.step_ms);
        if (s.loss) probe_residuals_.push_back(*s.loss - trend_->reference(s.step));
      } else {
        amp_ms_.push_back(s.step_ms);
        if (std::optional<std::string> why = far_slower()) return roll_back(s.step, *why);
        if (s.loss) {
          amp_losses_.push_back(*s.loss);
          const double ref = trend_->reference(s.step);
          amp_excess_.push_back(*s.loss - ref - options_.tolerance * std::abs(ref));
          if (std::optional<std::string> why = early_drift(s.step)) return roll_back(s.step, *why);
        }
      }
      if (++watched_ < options_.watch_steps) return std::nullopt;
      const Verdict loss = loss_verdict();
      if (loss.roll_back) return roll_back(s.step, loss.evidence);
      const Verdict speed = speed_verdict();
      if (options_.rollback_if_slower && speed.roll_back)
        return roll_back(s.step, "mixed-precision steps were not shown faster: " + speed.evidence);
      stage_ = AmpStage::Enabled;
      return AmpEvent{
          s.step, AmpEventKind::Accepted,
          fmt::format("watched {} steps: {}; {}{}", watched_, loss.evidence, speed.evidence,
                      options_.rollback_if_slower || !speed.roll_back
                          ? ""
                          : " (not shown faster, kept: rollback_if_slower is off)")};
    }
    case AmpStage::Enabled:
      if (bad_loss)
        return roll_back(s.step, fmt::format("the loss became {} under mixed precision", *s.loss));
      if (bad_gradients)
        return roll_back(s.step, "the gradients held inf or NaN under mixed precision");
      return std::nullopt;
    case AmpStage::RolledBack:
    case AmpStage::NotEnabled:
      return std::nullopt;
  }
  return std::nullopt;
}

std::vector<double> AutoAmpPolicy::fp32_loss_residuals() const {
  std::vector<double> out = trend_ ? trend_->residuals() : std::vector<double>{};
  out.insert(out.end(), probe_residuals_.begin(), probe_residuals_.end());
  return out;
}

AutoAmpPolicy::Verdict AutoAmpPolicy::loss_verdict() const {
  const std::vector<double> fp32 = fp32_loss_residuals();
  const std::optional<detail::RankTest> t = detail::rank_test_greater(amp_excess_, fp32, kMinEach);
  if (!t)
    return {false, fmt::format("loss not tested ({} mixed-precision and {} fp32 losses; the rank "
                               "test needs {} a side)",
                               amp_excess_.size(), fp32.size(), kMinEach)};
  const bool drifted = t->p < options_.significance;
  return {
      drifted,
      fmt::format("the loss {}: median {:.4g} over {} mixed-precision steps against the fp32 "
                  "trend {:.4g}; one-sided Mann-Whitney of their excess over the trend + "
                  "{:.0f} % against {} fp32 residuals: p = {:.2g} (a rollback needs p < {:.2g})",
                  drifted ? "drifted" : "kept to the fp32 trend", median(amp_losses_),
                  amp_losses_.size(), trend_->level(), 100 * options_.tolerance, fp32.size(), t->p,
                  options_.significance)};
}

std::optional<std::string> AutoAmpPolicy::early_drift(std::int64_t step) const {
  // A median of 3 or more: one outlier cannot carry it past the other losses.
  if (amp_losses_.size() < 3) return std::nullopt;
  const std::size_t k =
      std::min(amp_losses_.size(), static_cast<std::size_t>(std::max(options_.smooth_steps, 3)));
  const double m = median(
      std::vector<double>(amp_losses_.end() - static_cast<std::ptrdiff_t>(k), amp_losses_.end()));
  const TrendCheck c = trend_->check({m}, step, options_.tolerance);
  if (c.within) return std::nullopt;
  const Verdict v = loss_verdict();
  if (!v.roll_back) return std::nullopt;
  return fmt::format(
      "the median {:.4g} of the last {} mixed-precision losses is above the fp32 "
      "trend {:.4g} by more than the tolerance and 3 noise (limit {:.4g}), and {}",
      m, k, c.reference, c.limit, v.evidence);
}

AutoAmpPolicy::Verdict AutoAmpPolicy::speed_verdict() const {
  // Probes run between mixed-precision steps, with the same caches warm: no step to leave out.
  const std::vector<double> fp32 = probe_ms_.size() >= kMinEach ? probe_ms_ : steady(fp32_ms_);
  const std::vector<double> amp = steady(amp_ms_);
  // Faster by the margin: the fp32 times less the margin still above the mixed-precision ones.
  std::vector<double> fp32_margin = fp32;
  for (double& v : fp32_margin) v *= 1 - options_.faster_margin;
  const std::optional<detail::RankTest> t = detail::rank_test_greater(fp32_margin, amp, kMinEach);
  if (!t)
    return {true, fmt::format("step time not tested ({} mixed-precision and {} fp32 steps; the "
                              "rank test needs {} a side), and a change is kept only when shown "
                              "faster",
                              amp.size(), fp32.size(), kMinEach)};
  const double a = median(amp), f = median(fp32);
  const bool faster = t->p < kFasterSignificance && a <= f * (1 - options_.faster_margin);
  return {!faster,
          fmt::format("step {:.2f} ms against {:.2f} ms in fp32 (median host step "
                      "time{}, ratio {:.3f}); one-sided Mann-Whitney of fp32 - {:.0f} % "
                      "against it: p = {:.2g} (kept only at p < {:.2g} and a ratio at most {:.2f})",
                      a, f, timing_note(), f > 0 ? a / f : 0.0, 100 * options_.faster_margin, t->p,
                      kFasterSignificance, 1 - options_.faster_margin)};
}

std::optional<std::string> AutoAmpPolicy::far_slower() const {
  // The first mixed-precision step fills cast caches; the fastest of two or more after it shows
  // what the change costs, and one fast step keeps the watch going.
  if (!options_.rollback_if_slower || amp_ms_.size() < 3) return std::nullopt;
  // Against fp32 steps under the same load: the watch's probes once one ran (a machine that got
  // busy as the watch began must not look like the change's cost); without probes, the warm-up.
  std::optional<double> f;
  if (options_.fp32_probe_every > 0) {
    if (probe_ms_.empty()) return std::nullopt;
    f = median(probe_ms_);
  } else {
    f = steady_median(fp32_ms_);
  }
  if (!f || *f <= 0) return std::nullopt;
  const double fastest = *std::min_element(amp_ms_.begin() + 1, amp_ms_.end());
  if (fastest <= *f * options_.abort_ratio) return std::nullopt;
  return fmt::format(
      "mixed-precision steps were slower: the fastest of {} after the first took {:.2f} ms "
      "against {:.2f} ms in fp32 (median host step time of {}), {:.2f}x, over the {:.2f}x that "
      "rolls back at once, without waiting for the watch's end",
      amp_ms_.size() - 1, fastest, *f,
      probe_ms_.empty() ? std::string("the warm-up")
                        : fmt::format("{} fp32 steps interleaved with the watch", probe_ms_.size()),
      fastest / *f, options_.abort_ratio);
}

std::optional<double> AutoAmpPolicy::fp32_step_ms() const {
  // Probes run between mixed-precision steps, with the same caches warm: no step to leave out.
  if (probe_ms_.size() >= 3) return median(probe_ms_);
  return steady_median(fp32_ms_);
}
std::optional<double> AutoAmpPolicy::amp_step_ms() const { return steady_median(amp_ms_); }

std::optional<double> AutoAmpPolicy::fp32_loss_reference() const {
  if (!trend_) return std::nullopt;
  return trend_->level();
}

std::optional<double> AutoAmpPolicy::amp_loss() const {
  // The median the watch's loss test reports: one noisy batch does not set it.
  if (amp_losses_.empty()) return std::nullopt;
  return median(amp_losses_);
}

}  // namespace fathom
