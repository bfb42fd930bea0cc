#include "analyze/mann_whitney.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace fathom::detail {

std::optional<RankTest> rank_test_greater(const std::vector<double>& a,
                                          const std::vector<double>& b, std::size_t min_each) {
  min_each = std::max<std::size_t>(min_each, 1);
  if (a.size() < min_each || b.size() < min_each) return std::nullopt;
  std::vector<std::pair<double, bool>> all;  // value, from a
  all.reserve(a.size() + b.size());
  for (double v : a) {
    if (!std::isfinite(v)) return std::nullopt;
    all.emplace_back(v, true);
  }
  for (double v : b) {
    if (!std::isfinite(v)) return std::nullopt;
    all.emplace_back(v, false);
  }
  std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  // Mid-ranks for ties; the tie term corrects the variance.
  double rank_sum_a = 0, ties = 0;
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i;
    while (j < all.size() && all[j].first == all[i].first) ++j;
    const double mid = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    for (std::size_t k = i; k < j; ++k)
      if (all[k].second) rank_sum_a += mid;
    const double t = static_cast<double>(j - i);
    ties += t * t * t - t;
    i = j;
  }
  RankTest r;
  r.n_a = a.size();
  r.n_b = b.size();
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  const double n = na + nb;
  r.u = rank_sum_a - na * (na + 1) / 2;
  const double variance = na * nb / 12 * ((n + 1) - ties / (n * (n - 1)));
  if (variance <= 0) {  // every value equal: nothing suggests a is greater
    r.p = 1;
    return r;
  }
  const double z = (r.u - na * nb / 2 - 0.5) / std::sqrt(variance);
  r.p = 0.5 * std::erfc(z / std::sqrt(2.0));
  return r;
}

}  // namespace fathom::detail
