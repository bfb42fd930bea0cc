#include "analyze/step_alarms.h"

#include <fathom/loss_trend.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/bytes_text.h"
#include "base/thresholds.h"

namespace fathom {
namespace {

// Ranks 1..n, ties given their average rank.
std::vector<double> ranks(const std::vector<double>& x) {
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = avg;
    i = j + 1;
  }
  return r;
}

struct Split {
  std::size_t last_before = 0;  // index of the last point of the first segment
  double k = 0;
  double p = 1;
};

// The most likely change in x[lo, hi), each side at least kStepChangeMinSide points.
std::optional<Split> pettitt(const std::vector<double>& all, std::size_t lo, std::size_t hi) {
  const auto side = static_cast<std::size_t>(thresholds::kStepChangeMinSide);
  if (hi - lo < 2 * side) return std::nullopt;
  const std::vector<double> x(all.begin() + static_cast<std::ptrdiff_t>(lo),
                              all.begin() + static_cast<std::ptrdiff_t>(hi));
  const std::vector<double> r = ranks(x);
  const double n = static_cast<double>(x.size());
  double cum = 0;
  Split best;
  for (std::size_t t = 0; t + 1 < x.size(); ++t) {
    cum += r[t];
    if (t + 1 < side || x.size() - t - 1 < side) continue;
    const double u = std::fabs(2 * cum - static_cast<double>(t + 1) * (n + 1));
    if (u > best.k) {
      best.k = u;
      best.last_before = lo + t;
    }
  }
  best.p = pettitt_p_value(best.k, x.size());
  return best;
}

}  // namespace

double pettitt_p_value(double k, std::size_t n) noexcept {
  const double nn = static_cast<double>(n);
  return std::min(1.0, 2 * std::exp(-6 * k * k / (nn * nn * nn + nn * nn)));
}

double mann_kendall_z(const std::vector<double>& y) noexcept {
  const std::size_t n = y.size();
  if (n < 3) return 0;
  double s = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) s += (y[j] > y[i]) - (y[j] < y[i]);
  const double nn = static_cast<double>(n);
  // Without the ties' correction the variance is larger: z errs towards no alarm.
  const double var = nn * (nn - 1) * (2 * nn + 5) / 18;
  if (s == 0) return 0;
  return (s - (s > 0 ? 1 : -1)) / std::sqrt(var);
}

namespace {

struct Cut {
  std::size_t at = 0;  // the first step of the later segment
  double p = 1;
};

// Pettitt's split is where the ranks divide best, which a few busy steps just before a change can
// pull forward: five steps of 1.5 ms before a rise from 1.33 to 3.42 ms rank above most of the
// first segment, so the rank split took them into the second (CI saw step 245 for a change at 250).
// Within kStepChangeMinSide of that split, the boundary is moved to where each point lies nearer
// its own segment's median (least absolute deviation), which puts a point by its level, not its
// rank.
std::size_t refine_cut(const std::vector<double>& x, std::size_t lo, std::size_t cut,
                       std::size_t hi) {
  const auto side = static_cast<std::size_t>(thresholds::kStepChangeMinSide);
  const double b = median(std::vector<double>(x.begin() + static_cast<std::ptrdiff_t>(lo),
                                              x.begin() + static_cast<std::ptrdiff_t>(cut)));
  const double a = median(std::vector<double>(x.begin() + static_cast<std::ptrdiff_t>(cut),
                                              x.begin() + static_cast<std::ptrdiff_t>(hi)));
  const std::size_t from = std::max(lo + side, cut > side ? cut - side : 0);
  const std::size_t to = std::min(hi - side, cut + side);
  if (from > to) return cut;
  // cost(t) - cost(from): each point in [from, t) moves from the later segment to the earlier one.
  std::size_t best = cut;
  double at_cut = 0, running = 0, least = 0;
  bool have = false;
  for (std::size_t t = from;; ++t) {
    if (t == cut) at_cut = running;
    if (!have || running < least) {
      least = running;
      best = t;
      have = true;
    }
    if (t == to) break;
    running += std::fabs(x[t] - b) - std::fabs(x[t] - a);
  }
  // Only a strictly better boundary moves the rank test's.
  return least < at_cut ? best : cut;
}

// Binary segmentation: each change Pettitt's test holds significant, and each side searched
// again. A rank test sees which side is larger, not by how much: alone, on a run that got a little
// slower (a busier machine) and later much slower (a slower phase), it would report the one change
// at whichever boundary splits the ranks best, with the wrong step and the wrong size.
void segment(const std::vector<double>& x, std::size_t lo, std::size_t hi, int depth,
             std::vector<Cut>& cuts) {
  const auto split = pettitt(x, lo, hi);
  if (!split || split->p >= thresholds::kStepChangePValue) return;
  const std::size_t cut = refine_cut(x, lo, split->last_before + 1, hi);
  cuts.push_back({cut, split->p});
  if (depth >= 3) return;
  segment(x, lo, cut, depth + 1, cuts);
  segment(x, cut, hi, depth + 1, cuts);
}

std::vector<double> slice(const std::vector<double>& x, std::size_t lo, std::size_t hi) {
  return {x.begin() + static_cast<std::ptrdiff_t>(lo), x.begin() + static_cast<std::ptrdiff_t>(hi)};
}

}  // namespace

std::optional<StepChange> find_step_change(const StepSeries& s) {
  std::vector<double> x;
  x.reserve(s.points.size());
  for (const StepPoint& p : s.points) x.push_back(p.step_ms);
  std::vector<Cut> cuts;
  segment(x, 0, x.size(), 0, cuts);
  std::sort(cuts.begin(), cuts.end(), [](const Cut& a, const Cut& b) { return a.at < b.at; });
  // The largest rise between neighbouring segments: a change that made it faster (a warm-up) is
  // no alarm, and the one reported is the one that cost the most.
  std::optional<StepChange> best;
  for (std::size_t i = 0; i < cuts.size(); ++i) {
    const std::size_t lo = i == 0 ? 0 : cuts[i - 1].at;
    const std::size_t cut = cuts[i].at;
    const std::size_t hi = i + 1 < cuts.size() ? cuts[i + 1].at : x.size();
    const std::vector<double> before = slice(x, lo, cut), after = slice(x, cut, hi);
    const double b = median(before), a = median(after);
    if (b <= 0 || a <= b || a / b - 1 < thresholds::kStepChangeMinRelative) continue;
    if (best && a - b <= best->after_ms - best->before_ms) continue;
    StepChange c;
    c.step = s.points[cut].step;
    c.before_ms = b;
    c.after_ms = a;
    c.relative = a / b - 1;
    c.p_value = cuts[i].p;
    c.steps_before = static_cast<std::int64_t>(before.size());
    c.steps_after = static_cast<std::int64_t>(after.size());
    // What changed at the same point: the phase whose median grew most.
    double grew = 0;
    for (Phase ph : kAllPhases) {
      std::vector<double> pb, pa;
      for (std::size_t k = lo; k < hi; ++k)
        (k < cut ? pb : pa).push_back(s.points[k].phase_ms[static_cast<std::size_t>(ph)]);
      const double mb = median(pb), ma = median(pa);
      if (ma - mb > grew) {
        grew = ma - mb;
        c.phase = std::string(phase_name(ph));
        c.phase_before_ms = mb;
        c.phase_after_ms = ma;
      }
    }
    best = std::move(c);
  }
  return best;
}

std::optional<MemoryCreep> find_memory_creep(const StepSeries& s) {
  std::vector<const StepPoint*> pts;
  for (const StepPoint& p : s.points)
    if (p.memory_bytes) pts.push_back(&p);
  const std::size_t warmup = std::max<std::size_t>(
      5, static_cast<std::size_t>(thresholds::kMemoryCreepWarmupShare * pts.size()));
  if (pts.size() < warmup + 16) return std::nullopt;
  pts.erase(pts.begin(), pts.begin() + static_cast<std::ptrdiff_t>(warmup));
  // At most 512 evenly spaced points: the tests are O(n^2) in pairs.
  std::vector<const StepPoint*> use;
  const std::size_t step = (pts.size() + 511) / 512;
  for (std::size_t i = 0; i < pts.size(); i += step) use.push_back(pts[i]);
  std::vector<double> y;
  for (const StepPoint* p : use) y.push_back(static_cast<double>(*p->memory_bytes));
  const double z = mann_kendall_z(y);
  if (z < thresholds::kMemoryCreepZ) return std::nullopt;
  const std::size_t q = y.size() / 4;
  const double first =
      median(std::vector<double>(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(q)));
  const double last =
      median(std::vector<double>(y.end() - static_cast<std::ptrdiff_t>(q), y.end()));
  if (last - first < static_cast<double>(thresholds::kMemoryCreepMinBytes) ||
      last - first < thresholds::kMemoryCreepMinShare * first)
    return std::nullopt;
  std::vector<double> slopes;
  slopes.reserve(use.size() * (use.size() - 1) / 2);
  for (std::size_t i = 0; i < use.size(); ++i)
    for (std::size_t j = i + 1; j < use.size(); ++j)
      slopes.push_back((y[j] - y[i]) / static_cast<double>(use[j]->step - use[i]->step));
  MemoryCreep c;
  c.from_step = use.front()->step;
  c.to_step = use.back()->step;
  c.bytes_per_step = median(std::move(slopes));
  c.first_bytes = static_cast<std::int64_t>(first);
  c.last_bytes = static_cast<std::int64_t>(last);
  c.z = z;
  return c;
}

std::string step_change_text(const StepChange& c) {
  return fmt::format("step time rose {:.0f}% from step {} ({:.2f} -> {:.2f} ms)", 100 * c.relative,
                     c.step, c.before_ms, c.after_ms);
}

std::string memory_creep_text(const MemoryCreep& c, const std::string& memory) {
  return fmt::format("{} memory grows {} per step since step {}",
                     memory.empty() ? std::string("process") : memory,
                     detail::bytes_text(c.bytes_per_step), c.from_step);
}

void analyze_step_series(StepSeries& s) {
  s.change = find_step_change(s);
  s.creep = find_memory_creep(s);
}

}  // namespace fathom
