#pragma once
// The fp32 loss trend that mixed precision must keep to. A least-squares line through the losses
// of an fp32 window gives the level training had reached and the spread of single-batch losses
// around it; later losses (under autocast) drift when their recent mean rises above that level by
// more than a relative tolerance plus the noise such a mean can show by chance.
//
// The line is not extrapolated downward: loss curves flatten, so a falling fp32 line projected
// forward would call healthy training a drift. For the same reason the level is never below the
// mean of the window's last kRecentPoints losses (a line through a convex curve ends under it).
// A rising fp32 line is followed upward.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace fathom {

struct LossPoint {
  std::int64_t step = 0;
  double loss = 0;
};

struct TrendCheck {
  bool within = true;
  double recent_mean = 0;  // mean of the recent losses checked
  double reference = 0;    // the fp32 trend at the checked step
  double limit = 0;        // reference + tolerance + noise allowance
};

class LossTrend {
 public:
  // Needs at least 3 points, all finite; nullopt otherwise.
  static std::optional<LossTrend> fit(const std::vector<LossPoint>& fp32);

  double slope() const noexcept { return slope_; }
  double noise() const noexcept { return noise_; }  // residual standard deviation
  // Each fp32 loss minus the line at its step: what single batches do around the trend, the
  // sample Auto's rank test compares mixed-precision losses against.
  const std::vector<double>& residuals() const noexcept { return residuals_; }
  // The line at the window's last step, or the mean of the last losses when that is higher.
  double level() const noexcept { return level_; }
  static constexpr std::size_t kRecentPoints = 5;
  std::int64_t last_step() const noexcept { return last_step_; }

  // The fp32 trend at step: the window's final level, or the line when it rises.
  double reference(std::int64_t step) const noexcept;

  // recent: the latest losses (finite), the last one at step. tolerance: relative to the
  // reference (0.1 = 10 %). The noise allowance is 3 standard errors of their mean.
  TrendCheck check(const std::vector<double>& recent, std::int64_t step,
                   double tolerance) const noexcept;

 private:
  double slope_ = 0;
  double level_ = 0;
  double noise_ = 0;
  std::vector<double> residuals_;
  std::int64_t last_step_ = 0;
};

// The median of values (0 when empty); used for step times, robust to the odd slow step.
double median(std::vector<double> values);

}  // namespace fathom
