#include <fathom/amp_policy.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace fathom {
namespace {

// The first steps of a window pay for allocations and cast caches: leave them out of the timing.
std::optional<double> steady_median(const std::vector<double>& ms) {
  if (ms.empty()) return std::nullopt;
  const std::size_t skip = ms.size() > 4 ? 1 : 0;
  return median(std::vector<double>(ms.begin() + static_cast<std::ptrdiff_t>(skip), ms.end()));
}

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
}

AmpEvent AutoAmpPolicy::roll_back(std::int64_t step, std::string reason) {
  stage_ = AmpStage::RolledBack;
  return AmpEvent{step, AmpEventKind::RolledBack, std::move(reason)};
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
      } else if (amp_ms_.push_back(s.step_ms); s.loss) {
        amp_losses_.push_back(*s.loss);
        const std::size_t k = std::min<std::size_t>(
            amp_losses_.size(), static_cast<std::size_t>(options_.smooth_steps));
        const std::vector<double> recent(amp_losses_.end() - static_cast<std::ptrdiff_t>(k),
                                         amp_losses_.end());
        const TrendCheck c = trend_->check(recent, s.step, options_.tolerance);
        if (!c.within) {
          return roll_back(
              s.step, fmt::format("the loss drifted: mean {:.4g} over the last {} steps, above "
                                  "the fp32 trend {:.4g} by more than the tolerance (limit {:.4g})",
                                  c.recent_mean, k, c.reference, c.limit));
        }
      }
      if (++watched_ < options_.watch_steps) return std::nullopt;
      const double fp32 = fp32_step_ms().value_or(0);
      const double amp = amp_step_ms().value_or(0);
      if (options_.rollback_if_slower && fp32 > 0 && amp > fp32 * (1 + options_.slower_margin)) {
        return roll_back(
            s.step, fmt::format("mixed-precision steps were slower: {:.2f} ms against {:.2f} ms "
                                "in fp32 (median host step time{})",
                                amp, fp32, timing_note()));
      }
      stage_ = AmpStage::Enabled;
      return AmpEvent{s.step, AmpEventKind::Accepted,
                      fmt::format("loss within {:.0f} % of the fp32 trend over {} steps; step "
                                  "{:.2f} ms against {:.2f} ms in fp32 (median host step time{})",
                                  100 * options_.tolerance, watched_, amp, fp32, timing_note())};
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
  if (amp_losses_.empty()) return std::nullopt;
  const std::size_t k =
      std::min<std::size_t>(amp_losses_.size(), static_cast<std::size_t>(options_.smooth_steps));
  double sum = 0;
  for (auto it = amp_losses_.end() - static_cast<std::ptrdiff_t>(k); it != amp_losses_.end(); ++it)
    sum += *it;
  return sum / static_cast<double>(k);
}

}  // namespace fathom
