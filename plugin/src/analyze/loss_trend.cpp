#include <fathom/loss_trend.h>

#include <algorithm>
#include <cmath>

namespace fathom {

std::optional<LossTrend> LossTrend::fit(const std::vector<LossPoint>& fp32) {
  if (fp32.size() < 3) return std::nullopt;
  const double n = static_cast<double>(fp32.size());
  double mx = 0, my = 0;
  for (const LossPoint& p : fp32) {
    if (!std::isfinite(p.loss)) return std::nullopt;
    mx += static_cast<double>(p.step);
    my += p.loss;
  }
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0;
  for (const LossPoint& p : fp32) {
    const double dx = static_cast<double>(p.step) - mx;
    sxx += dx * dx;
    sxy += dx * (p.loss - my);
  }
  LossTrend t;
  t.slope_ = sxx > 0 ? sxy / sxx : 0.0;
  double ss = 0;
  for (const LossPoint& p : fp32) {
    const double r = p.loss - (my + t.slope_ * (static_cast<double>(p.step) - mx));
    ss += r * r;
    t.residuals_.push_back(r);
  }
  // Two parameters were fitted: n - 2 degrees of freedom.
  t.noise_ = std::sqrt(ss / (n - 2));
  t.last_step_ =
      std::max_element(fp32.begin(), fp32.end(), [](const LossPoint& a, const LossPoint& b) {
        return a.step < b.step;
      })->step;
  // A line through a convex, falling curve ends below it: never put the level under the mean of
  // the last losses, or healthy training right after the window would look like a drift.
  std::vector<LossPoint> by_step = fp32;
  std::sort(by_step.begin(), by_step.end(),
            [](const LossPoint& a, const LossPoint& b) { return a.step < b.step; });
  const std::size_t k = std::min<std::size_t>(kRecentPoints, by_step.size());
  double recent = 0;
  for (std::size_t i = by_step.size() - k; i < by_step.size(); ++i) recent += by_step[i].loss;
  t.level_ = std::max(my + t.slope_ * (static_cast<double>(t.last_step_) - mx),
                      recent / static_cast<double>(k));
  return t;
}

double LossTrend::reference(std::int64_t step) const noexcept {
  const double ahead = static_cast<double>(std::max<std::int64_t>(step - last_step_, 0));
  return level_ + std::max(slope_, 0.0) * ahead;
}

TrendCheck LossTrend::check(const std::vector<double>& recent, std::int64_t step,
                            double tolerance) const noexcept {
  TrendCheck c;
  c.reference = reference(step);
  if (recent.empty()) {
    c.limit = c.reference;
    return c;
  }
  double sum = 0;
  for (double v : recent) sum += v;
  c.recent_mean = sum / static_cast<double>(recent.size());
  c.limit = c.reference + tolerance * std::abs(c.reference) +
            3.0 * noise_ / std::sqrt(static_cast<double>(recent.size()));
  c.within = std::isfinite(c.recent_mean) && c.recent_mean <= c.limit;
  return c;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

}  // namespace fathom
