#include <fathom/activation_planner.h>
#include <fathom/checkpoint_planner.h>
#include <fathom/error.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "analyze/pareto_front.h"
#include "base/bytes_text.h"

namespace fathom {
namespace {

using detail::bytes_text;
using detail::FrontPoint;
using detail::FrontSource;

constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
constexpr int kSegment = -1;  // FrontPoint::how of a whole-recompute segment; >= 0: a unit option

void check_units(const std::vector<ActivationUnit>& units, const ActivationPlanOptions& options) {
  if (!(options.link_bytes_per_second >= 0) || !std::isfinite(options.link_bytes_per_second))
    throw Error(fmt::format(
        "activation planner: link bandwidth {} bytes/s is not a finite number >= 0; give the "
        "measured host<->device bandwidth, or 0 when it is unknown",
        options.link_bytes_per_second));
  if (!(options.backward_to_forward >= 0) || !std::isfinite(options.backward_to_forward))
    throw Error(fmt::format(
        "activation planner: backward_to_forward {} is not a finite number >= 0; 2 is usual",
        options.backward_to_forward));
  if (options.max_segment_units < 0)
    throw Error(
        fmt::format("activation planner: max_segment_units {} is negative; give 0 for any length",
                    options.max_segment_units));
  if (options.max_front_points < 4)
    throw Error(fmt::format("activation planner: max_front_points {} is below 4; give 1024 or more",
                            options.max_front_points));
  for (std::size_t i = 0; i < units.size(); ++i) {
    const ActivationUnit& u = units[i];
    if (u.groups.empty())
      throw Error(fmt::format(
          "activation planner: unit {} ('{}') has no op groups; merge it into its neighbour", i,
          u.name));
    if (u.input_bytes < 0 || u.input_saved_bytes < 0 || u.output_bytes < 0)
      throw Error(fmt::format(
          "activation planner: unit {} ('{}') has a negative size; measure it again", i, u.name));
    for (std::size_t g = 0; g < u.groups.size(); ++g) {
      const SavedGroup& s = u.groups[g];
      if (s.saved_bytes < 0 || !(s.forward_ms >= 0) || !std::isfinite(s.forward_ms) ||
          !(s.flops >= 0) || !std::isfinite(s.flops))
        throw Error(fmt::format(
            "activation planner: group {} ('{}') of unit {} ('{}') has a negative or non-finite "
            "size, time or FLOP count; measure it again",
            g, s.name, i, u.name));
      for (int in : s.inputs)
        if (in != kUnitInput && (in < 0 || in >= static_cast<int>(g)))
          throw Error(fmt::format(
              "activation planner: group {} ('{}') of unit {} ('{}') reads group {}, which is "
              "not an earlier group of its unit; give earlier indices or kUnitInput (-1)",
              g, s.name, i, u.name, in));
    }
  }
}

double unit_forward_ms(const ActivationUnit& u) {
  double t = 0;
  for (const SavedGroup& g : u.groups) t += g.forward_ms;
  return t;
}

bool reads_unit_input(const SavedGroup& g) {
  return std::find(g.inputs.begin(), g.inputs.end(), kUnitInput) != g.inputs.end();
}

// E_i of the header: the transfer time of `bytes` each way not hidden behind the next unit.
double exposed_ms(std::int64_t bytes, double bandwidth, double next_forward_ms, double r) {
  if (bytes <= 0 || bandwidth <= 0) return 0;
  const double t = static_cast<double>(bytes) / bandwidth * 1e3;
  return std::max(0.0, t - next_forward_ms) + std::max(0.0, t - r * next_forward_ms);
}

// The parts of unit i a whole-recompute segment holds: its groups but the output, its output
// group, and what its ops save of its input.
std::int64_t own_bytes(const ActivationUnit& u) {
  std::int64_t s = 0;
  for (std::size_t g = 0; g + 1 < u.groups.size(); ++g) s += u.groups[g].saved_bytes;
  return s;
}
std::int64_t output_saved(const ActivationUnit& u) { return u.groups.back().saved_bytes; }

// One Pareto-optimal choice for a unit outside segments, as the sequence DP reads it.
struct UnitOption {
  std::int64_t kept = 0;         // K
  std::int64_t at_backward = 0;  // o + T: what its backward holds beyond K and its input
  std::int64_t input_held = 0;   // u
  bool output_kept = false;
  double time = 0;  // recompute + exposed transfer
  std::vector<TensorChoice> choices;
  TensorChoice input = TensorChoice::Keep;
};

// A unit's choices for its first groups: what they add so far.
struct Partial {
  std::int64_t kept = 0, recomputed = 0, offloaded = 0;
  std::int64_t largest_offloaded = 0;  // of its groups, while it recomputes none (else 0)
  double recompute_ms = 0;
  bool reads_input = false, output_kept = false, recomputes = false;
  std::vector<TensorChoice> choices;
};

// What the unit's backward holds of its recomputed and offloaded groups and offloaded input
// (A_i of the header): all of them when it recomputes (the recompute pass runs first and may
// read offloaded tensors), else its fetch window, two items at most.
std::int64_t rebuilt_at_backward(bool recomputes, std::int64_t recomputed, std::int64_t offloaded,
                                 std::int64_t largest_offloaded, std::int64_t input_offloaded) {
  if (recomputes) return recomputed + offloaded + input_offloaded;
  return std::min(offloaded + input_offloaded, 2 * std::max(largest_offloaded, input_offloaded));
}

// a is no worse than b under every choice of the groups still to come: no more kept, offloaded
// or recompute time, and no more at the unit's backward whichever way it ends. Its kept bytes
// plus what its backward holds are the sum of its groups when it recomputes, and no more when it
// does not: so when b recomputes, nothing more is asked; when it does not, a must not either,
// and its largest offloaded group must be no larger.
bool dominates(const Partial& a, const Partial& b) {
  if (!(a.kept <= b.kept && a.offloaded <= b.offloaded && a.recompute_ms <= b.recompute_ms &&
        (!a.reads_input || b.reads_input) && (!a.output_kept || b.output_kept)))
    return false;
  return b.recomputes || (!a.recomputes && a.largest_offloaded <= b.largest_offloaded);
}

bool dominates(const UnitOption& a, const UnitOption& b) {
  return a.kept <= b.kept && a.kept + a.at_backward <= b.kept + b.at_backward &&
         a.input_held <= b.input_held && a.time <= b.time && (!a.output_kept || b.output_kept);
}

// Drops every point another one dominates (of equal points, all but one).
template <class T, class Key>
void keep_undominated(std::vector<T>& points, Key key) {
  std::sort(points.begin(), points.end(), [&](const T& a, const T& b) { return key(a) < key(b); });
  std::vector<T> kept;
  for (T& p : points) {
    bool beaten = false;
    for (const T& k : kept)
      if (dominates(k, p)) {
        beaten = true;
        break;
      }
    if (!beaten) kept.push_back(std::move(p));
  }
  points.swap(kept);
}

// Units whose groups' choices leave more undominated partial choices than this (dozens of groups
// of distinct sizes) are thinned to this many, spread evenly over the memory they hold.
constexpr std::size_t kUnitCap = 2048;

// output_held_anyway: the next unit saves at least this unit's output group of its input, so
// the boundary holds it whatever this unit chooses and keeping it costs nothing.
std::vector<UnitOption> unit_options(const ActivationUnit& u, double next_forward_ms,
                                     bool output_held_anyway, const ActivationPlanOptions& options,
                                     bool& exact) {
  const bool offload = options.link_bytes_per_second > 0;
  std::vector<Partial> partial(1);
  const int m = static_cast<int>(u.groups.size());
  for (int g = 0; g < m; ++g) {
    const SavedGroup& s = u.groups[g];
    const bool last = g + 1 == m;
    std::vector<Partial> next;
    next.reserve(partial.size() * 3);
    for (const Partial& p : partial) {
      Partial keep = p;
      keep.choices.push_back(TensorChoice::Keep);
      if (last) {
        keep.output_kept = true;
      } else {
        keep.kept += s.saved_bytes;
      }
      next.push_back(std::move(keep));
      if (last && output_held_anyway) continue;
      Partial recompute = p;
      recompute.choices.push_back(TensorChoice::Recompute);
      recompute.recomputed += s.saved_bytes;
      recompute.recomputes = true;
      recompute.largest_offloaded = 0;  // a unit that recomputes brings back all it offloaded
      recompute.recompute_ms += s.forward_ms;
      recompute.reads_input = recompute.reads_input || reads_unit_input(s);
      next.push_back(std::move(recompute));
      if (offload) {
        Partial off = p;
        off.choices.push_back(TensorChoice::Offload);
        off.offloaded += s.saved_bytes;
        if (!off.recomputes) off.largest_offloaded = std::max(off.largest_offloaded, s.saved_bytes);
        next.push_back(std::move(off));
      }
    }
    keep_undominated(next, [](const Partial& p) {
      return std::tuple(p.kept, p.offloaded, p.recompute_ms, p.largest_offloaded, p.reads_input,
                        p.output_kept);
    });
    if (next.size() > kUnitCap) {
      exact = false;
      std::sort(next.begin(), next.end(), [](const Partial& a, const Partial& b) {
        return a.kept + a.recomputed + a.offloaded < b.kept + b.recomputed + b.offloaded;
      });
      std::vector<Partial> thinned;
      for (std::size_t k = 0; k < kUnitCap; ++k)
        thinned.push_back(std::move(next[k * (next.size() - 1) / (kUnitCap - 1)]));
      next.swap(thinned);
    }
    partial.swap(next);
  }
  std::vector<UnitOption> out;
  for (Partial& p : partial) {
    UnitOption o;
    o.kept = p.kept;
    o.output_kept = p.output_kept;
    const std::int64_t output = p.output_kept ? output_saved(u) : 0;
    o.at_backward = output + rebuilt_at_backward(p.recomputes, p.recomputed, p.offloaded,
                                                 p.largest_offloaded, 0);
    const std::int64_t input =
        p.reads_input ? std::max(u.input_saved_bytes, u.input_bytes) : u.input_saved_bytes;
    o.input_held = input;
    o.time = p.recompute_ms + exposed_ms(p.offloaded, options.link_bytes_per_second,
                                         next_forward_ms, options.backward_to_forward);
    o.choices = std::move(p.choices);
    if (offload && input > 0) {
      // The same groups with the input offloaded: none of it held, all of it back at backward.
      UnitOption off = o;
      off.input = TensorChoice::Offload;
      off.input_held = 0;
      off.at_backward = output + rebuilt_at_backward(p.recomputes, p.recomputed, p.offloaded,
                                                     p.largest_offloaded, input);
      off.time = p.recompute_ms + exposed_ms(p.offloaded + input, options.link_bytes_per_second,
                                             next_forward_ms, options.backward_to_forward);
      out.push_back(std::move(off));
    }
    out.push_back(std::move(o));
  }
  keep_undominated(out, [](const UnitOption& o) {
    return std::tuple(o.kept, o.input_held, o.time, o.output_kept);
  });
  return out;
}

// The chain as the sequence DP reads it: each unit's options, and prefix sums for the cost of
// a whole-recompute segment in O(1), as checkpoint_planner.cpp's Model.
struct Chain {
  const std::vector<ActivationUnit>& units;
  int max_segment = 0;
  std::size_t front_cap = 0;
  std::vector<std::vector<UnitOption>> options;
  std::vector<std::int64_t> own_sum, mid_sum;
  std::vector<double> time_sum;
  bool exact = true;

  Chain(const std::vector<ActivationUnit>& u, const ActivationPlanOptions& o)
      : units(u),
        max_segment(o.max_segment_units),
        front_cap(static_cast<std::size_t>(o.max_front_points)) {
    const int count = n();
    own_sum.assign(count + 1, 0);
    mid_sum.assign(count + 1, 0);
    time_sum.assign(count + 1, 0.0);
    for (int i = 0; i < count; ++i) {
      const double next = i + 1 < count ? unit_forward_ms(units[i + 1]) : 0.0;
      // A selective unit's next boundary holds at least the next unit's saved input (a segment
      // starting there holds all of it), and input_bytes >= input_saved_bytes; unless the next
      // unit may offload its input, which a link allows.
      const bool held = i + 1 < count && o.link_bytes_per_second <= 0 &&
                        output_saved(units[i]) <= units[i + 1].input_saved_bytes &&
                        output_saved(units[i]) <= units[i + 1].input_bytes;
      options.push_back(unit_options(units[i], next, held, o, exact));
      own_sum[i + 1] = own_sum[i] + own_bytes(units[i]);
      time_sum[i + 1] = time_sum[i] + unit_forward_ms(units[i]);
      mid_sum[i + 1] =
          mid_sum[i] +
          (i >= 1 ? std::max(output_saved(units[i - 1]), units[i].input_saved_bytes) : 0);
    }
  }
  int n() const { return static_cast<int>(units.size()); }
  int segment_limit(int j) const { return max_segment > 0 ? std::min(n(), j + max_segment) : n(); }
  int segment_start(int k) const { return max_segment > 0 ? std::max(0, k - max_segment) : 0; }
  // What boundary j holds of the unit before it when that unit kept its output group.
  std::int64_t kept_by_before(int j, bool last_kept) const {
    return last_kept && j > 0 ? output_saved(units[j - 1]) : 0;
  }
  std::int64_t need(int j, bool last_kept, const UnitOption& o) const {
    return std::max(kept_by_before(j, last_kept), o.input_held);
  }
  std::int64_t need_segment(int j, bool last_kept) const {
    return std::max(kept_by_before(j, last_kept), units[j].input_bytes);
  }
  // What recomputing units [j, k) holds beyond its input.
  std::int64_t recompute_bytes(int j, int k) const {
    return own_sum[k] - own_sum[j] + (mid_sum[k] - mid_sum[j + 1]) + output_saved(units[k - 1]);
  }
  double recompute_ms(int j, int k) const { return time_sum[k] - time_sum[j]; }
};

int state_of(int j, bool last_kept) { return 2 * j + (last_kept ? 1 : 0); }

// extra[state]: the least memory, above what a point holds on reaching the state, that the rest
// of the chain needs at its most demanding moment.
std::vector<std::int64_t> least_extra(const Chain& c) {
  const int n = c.n();
  std::vector<std::int64_t> extra(2 * (n + 1), kNone);
  extra[state_of(n, false)] = 0;
  extra[state_of(n, true)] = c.kept_by_before(n, true);
  for (int j = n - 1; j >= 0; --j) {
    for (bool lk : {false, true}) {
      std::int64_t best = kNone;
      for (const UnitOption& o : c.options[j])
        best = std::min(best, c.need(j, lk, o) + o.kept +
                                  std::max(o.at_backward, extra[state_of(j + 1, o.output_kept)]));
      const std::int64_t need = c.need_segment(j, lk);
      for (int k = j + 1; k <= c.segment_limit(j); ++k)
        best = std::min(best, need + std::max(c.recompute_bytes(j, k), extra[state_of(k, false)]));
      extra[state_of(j, lk)] = best;
    }
  }
  return extra;
}

bool feasible(const Chain& c, std::int64_t budget) {
  const int n = c.n();
  std::vector<std::int64_t> least(2 * (n + 1), kNone);
  least[state_of(0, false)] = 0;
  for (int j = 0; j < n; ++j) {
    for (bool lk : {false, true}) {
      const std::int64_t mem = least[state_of(j, lk)];
      if (mem == kNone) continue;
      for (const UnitOption& o : c.options[j]) {
        const std::int64_t held = mem + c.need(j, lk, o) + o.kept;
        std::int64_t& to = least[state_of(j + 1, o.output_kept)];
        if (held + o.at_backward <= budget) to = std::min(to, held);
      }
      const std::int64_t held = mem + c.need_segment(j, lk);
      for (int k = j + 1; k <= c.segment_limit(j) && held + c.recompute_bytes(j, k) <= budget; ++k)
        least[state_of(k, false)] = std::min(least[state_of(k, false)], held);
    }
  }
  for (bool lk : {false, true}) {
    const std::int64_t mem = least[state_of(n, lk)];
    if (mem != kNone && mem + c.kept_by_before(n, lk) <= budget) return true;
  }
  return false;
}

std::int64_t least_budget(const Chain& c, std::int64_t everything_kept_peak) {
  std::int64_t hi = everything_kept_peak, lo = -1;  // hi fits: keep everything
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (feasible(c, mid) ? hi : lo) = mid;
  }
  return hi;
}

ActivationAssignment keep_everything(const std::vector<ActivationUnit>& units) {
  ActivationAssignment a;
  for (const ActivationUnit& u : units) a.choices.emplace_back(u.groups.size(), TensorChoice::Keep);
  a.inputs.assign(units.size(), TensorChoice::Keep);
  return a;
}

// The least-time assignment under budget (which must be feasible), or nothing.
bool best_assignment(const Chain& c, std::int64_t budget, ActivationAssignment& out, bool& exact) {
  const int n = c.n();
  const std::vector<std::int64_t> extra = least_extra(c);
  std::vector<std::vector<FrontPoint>> fronts(2 * (n + 1));
  fronts[state_of(0, false)].push_back(FrontPoint{});
  std::vector<FrontSource> sources[2];
  for (int k = 1; k <= n; ++k) {
    const int unit = k - 1;
    sources[0].clear();
    sources[1].clear();
    for (bool lk : {false, true}) {
      const auto& f = fronts[state_of(unit, lk)];
      if (f.empty()) continue;
      for (int oi = 0; oi < static_cast<int>(c.options[unit].size()); ++oi) {
        const UnitOption& o = c.options[unit][oi];
        const std::int64_t shift = c.need(unit, lk, o) + o.kept;
        const int end = detail::points_within(f, budget - shift - o.at_backward);
        if (end > 0)
          sources[o.output_kept ? 1 : 0].push_back(
              FrontSource{&f, 0, end, shift, o.time, state_of(unit, lk), oi});
      }
    }
    for (int j = c.segment_start(k); j < k; ++j) {
      const std::int64_t recompute = c.recompute_bytes(j, k);
      for (bool lk : {false, true}) {
        const auto& f = fronts[state_of(j, lk)];
        const std::int64_t need = c.need_segment(j, lk);
        const int end = detail::points_within(f, budget - need - recompute);
        if (end > 0)
          sources[0].push_back(
              FrontSource{&f, 0, end, need, c.recompute_ms(j, k), state_of(j, lk), kSegment});
      }
    }
    for (bool lk : {false, true}) {
      auto& front = fronts[state_of(k, lk)];
      front = detail::merge_fronts(sources[lk ? 1 : 0], budget - extra[state_of(k, lk)]);
      if (detail::thin_front(front, budget, c.front_cap)) exact = false;
    }
  }
  int best_state = -1, best_point = -1;
  double best_time = std::numeric_limits<double>::infinity();
  std::int64_t best_mem = kNone;
  for (bool lk : {false, true}) {
    const int s = state_of(n, lk);
    for (int p = 0; p < static_cast<int>(fronts[s].size()); ++p) {
      const std::int64_t mem = fronts[s][p].mem + c.kept_by_before(n, lk);
      if (mem > budget) continue;
      if (fronts[s][p].time < best_time || (fronts[s][p].time == best_time && mem < best_mem)) {
        best_time = fronts[s][p].time;
        best_mem = mem;
        best_state = s;
        best_point = p;
      }
    }
  }
  if (best_state < 0) return false;
  out = ActivationAssignment{};
  out.choices.resize(n);
  out.inputs.assign(n, TensorChoice::Keep);
  for (int s = best_state, p = best_point; fronts[s][p].from_state >= 0;) {
    const FrontPoint& at = fronts[s][p];
    const int from_unit = at.from_state / 2, to_unit = s / 2;
    if (at.how == kSegment) {
      out.segments.push_back(CheckpointSegment{from_unit, to_unit});
      for (int i = from_unit; i < to_unit; ++i)
        out.choices[i].assign(c.units[i].groups.size(), TensorChoice::Recompute);
    } else {
      out.choices[from_unit] = c.options[from_unit][at.how].choices;
      out.inputs[from_unit] = c.options[from_unit][at.how].input;
    }
    s = at.from_state;
    p = at.from_point;
  }
  std::reverse(out.segments.begin(), out.segments.end());
  return true;
}

// A transfer the model hides still takes pinned host memory and the link from the input
// pipeline's copies, and the DP, among plans equal in time, holds the least memory, which
// offloads all it can hide. Of the plan found, keep each offloaded group (the last units'
// first) that the budget still allows at no more predicted time.
void keep_needless_offloads(const std::vector<ActivationUnit>& units, std::int64_t budget,
                            const ActivationPlanOptions& options, ActivationAssignment& a) {
  double time = evaluate_activations(units, a, options).extra_ms();
  auto try_keep = [&](TensorChoice& choice) {
    if (choice != TensorChoice::Offload) return;
    choice = TensorChoice::Keep;
    const ActivationCost c = evaluate_activations(units, a, options);
    if (c.peak_bytes <= budget && c.extra_ms() <= time) {
      time = c.extra_ms();
    } else {
      choice = TensorChoice::Offload;
    }
  };
  for (int i = static_cast<int>(units.size()) - 1; i >= 0; --i) {
    for (std::size_t g = 0; g < units[i].groups.size(); ++g) try_keep(a.choices[i][g]);
    if (static_cast<std::size_t>(i) < a.inputs.size()) try_keep(a.inputs[i]);
  }
}

std::string plan_text(const std::vector<ActivationUnit>& units, const ActivationPlan& plan) {
  const ActivationCost& c = plan.cost;
  int kept = 0, recomputed = 0, offloaded = 0, expensive = 0, total = 0, in_segments = 0;
  for (std::size_t i = 0; i < units.size(); ++i) {
    for (std::size_t g = 0; g < units[i].groups.size(); ++g) {
      ++total;
      switch (plan.assignment.choices[i][g]) {
        case TensorChoice::Keep:
          ++kept;
          break;
        case TensorChoice::Recompute:
          ++recomputed;
          if (units[i].groups[g].expensive) ++expensive;
          break;
        case TensorChoice::Offload:
          ++offloaded;
          break;
      }
    }
  }
  int inputs_offloaded = 0;
  for (TensorChoice c : plan.assignment.inputs)
    inputs_offloaded += c == TensorChoice::Offload ? 1 : 0;
  for (const CheckpointSegment& s : plan.assignment.segments) in_segments += s.end - s.begin;
  if (recomputed == 0 && offloaded == 0 && inputs_offloaded == 0)
    return fmt::format("nothing to recompute or offload: the peak, {}, fits the budget of {}",
                       bytes_text(c.peak_bytes), bytes_text(plan.budget_bytes));
  std::string s = fmt::format("keep {}, recompute {}, offload {} of {} saved tensors", kept,
                              recomputed, offloaded, total);
  if (expensive > 0)
    s += fmt::format(" ({} of the recomputed are matmul/conv/attention)", expensive);
  if (inputs_offloaded > 0)
    s += fmt::format("; offload what {} of {} units hold of their input", inputs_offloaded,
                     units.size());
  if (!plan.assignment.segments.empty())
    s += fmt::format("; {} of {} units recomputed whole in {} segment{}", in_segments, units.size(),
                     plan.assignment.segments.size(),
                     plan.assignment.segments.size() == 1 ? "" : "s");
  s += fmt::format(
      ": predicted peak {} (budget {}, {} with everything kept), {} kept, {} recomputed, {} "
      "offloaded; extra {:.3g} ms a step: recompute {:.3g} ms ({:.0f}% of the forward",
      bytes_text(c.peak_bytes), bytes_text(plan.budget_bytes),
      bytes_text(plan.unconstrained_peak_bytes), bytes_text(c.kept_bytes),
      bytes_text(c.recomputed_bytes), bytes_text(c.offloaded_bytes), c.extra_ms(), c.recompute_ms,
      plan.forward_ms > 0 ? 100.0 * c.recompute_ms / plan.forward_ms : 0.0);
  if (plan.forward_flops > 0)
    s += fmt::format(", {:.0f}% of its FLOPs", 100.0 * c.recompute_flops / plan.forward_flops);
  s += fmt::format("), exposed transfer {:.3g} ms", c.exposed_transfer_ms);
  return s;
}

}  // namespace

ActivationCost evaluate_activations(const std::vector<ActivationUnit>& units,
                                    const ActivationAssignment& a,
                                    const ActivationPlanOptions& options) {
  check_units(units, options);
  const int n = static_cast<int>(units.size());
  if (static_cast<int>(a.choices.size()) != n)
    throw Error(fmt::format(
        "activation plan: {} units' choices given for a chain of {} units; give one list of "
        "choices per unit",
        a.choices.size(), n));
  for (int i = 0; i < n; ++i)
    if (a.choices[i].size() != units[i].groups.size())
      throw Error(fmt::format(
          "activation plan: unit {} ('{}') has {} groups but {} choices; give one per group", i,
          units[i].name, units[i].groups.size(), a.choices[i].size()));
  if (!a.inputs.empty() && static_cast<int>(a.inputs.size()) != n)
    throw Error(fmt::format(
        "activation plan: {} input choices given for a chain of {} units; give one per unit, or "
        "none (every input kept)",
        a.inputs.size(), n));
  for (int i = 0; i < n; ++i)
    if (a.input(i) == TensorChoice::Recompute)
      throw Error(fmt::format(
          "activation plan: the input of unit {} ('{}') is marked Recompute; a unit's input is "
          "kept or offloaded (a whole-recompute segment keeps its own)",
          i, units[i].name));
  std::vector<int> segment_of(n, -1);
  int previous_end = 0;
  for (std::size_t s = 0; s < a.segments.size(); ++s) {
    const CheckpointSegment& seg = a.segments[s];
    if (seg.begin < previous_end || seg.begin >= seg.end || seg.end > n)
      throw Error(fmt::format(
          "activation plan: segment [{}, {}) is empty, overlaps the one before, or lies "
          "outside the chain of {} units; give ordered, disjoint, non-empty ranges",
          seg.begin, seg.end, n));
    for (int i = seg.begin; i < seg.end; ++i) {
      segment_of[i] = static_cast<int>(s);
      if (a.input(i) != TensorChoice::Keep)
        throw Error(fmt::format(
            "activation plan: unit {} ('{}') is in segment [{}, {}), which keeps the segment's "
            "input, but its input is offloaded; keep it",
            i, units[i].name, seg.begin, seg.end));
      for (TensorChoice c : a.choices[i])
        if (c != TensorChoice::Recompute)
          throw Error(fmt::format(
              "activation plan: unit {} ('{}') is in segment [{}, {}), which recomputes it "
              "whole, but a group of it is not Recompute; mark them all Recompute",
              i, units[i].name, seg.begin, seg.end));
    }
    previous_end = seg.end;
  }
  const double bandwidth = options.link_bytes_per_second;
  ActivationCost cost;
  cost.units.resize(n);
  std::vector<std::int64_t> kept(n, 0), output_kept(n, 0), transient(n, 0), input_held(n, 0);
  for (int i = 0; i < n; ++i) {
    const ActivationUnit& u = units[i];
    const int m = static_cast<int>(u.groups.size());
    bool reads_input = false, recomputes = false;
    std::int64_t offloaded = 0, recomputed = 0, largest_offloaded = 0;
    UnitActivationCost& uc = cost.units[i];
    for (int g = 0; g < m; ++g) {
      const SavedGroup& s = u.groups[g];
      switch (a.choices[i][g]) {
        case TensorChoice::Keep:
          uc.kept_bytes += s.saved_bytes;
          (g + 1 == m ? output_kept[i] : kept[i]) += s.saved_bytes;
          break;
        case TensorChoice::Recompute:
          uc.recomputed_bytes += s.saved_bytes;
          uc.recompute_ms += s.forward_ms;
          uc.recompute_flops += s.flops;
          recomputed += s.saved_bytes;
          recomputes = true;
          reads_input = reads_input || reads_unit_input(s);
          break;
        case TensorChoice::Offload:
          if (bandwidth <= 0)
            throw Error(fmt::format(
                "activation plan: group {} ('{}') of unit {} ('{}') is offloaded but no link "
                "bandwidth is given; measure the host<->device bandwidth or keep or recompute it",
                g, s.name, i, u.name));
          uc.offloaded_bytes += s.saved_bytes;
          offloaded += s.saved_bytes;
          largest_offloaded = std::max(largest_offloaded, s.saved_bytes);
          break;
      }
    }
    input_held[i] =
        reads_input ? std::max(u.input_saved_bytes, u.input_bytes) : u.input_saved_bytes;
    std::int64_t input_offloaded = 0;
    if (a.input(i) == TensorChoice::Offload && input_held[i] > 0) {
      if (bandwidth <= 0)
        throw Error(fmt::format(
            "activation plan: the input of unit {} ('{}') is offloaded but no link bandwidth is "
            "given; measure the host<->device bandwidth or keep it",
            i, u.name));
      uc.offloaded_bytes += input_held[i];
      input_offloaded = input_held[i];
      input_held[i] = 0;
    }
    transient[i] = rebuilt_at_backward(recomputes, recomputed, offloaded,
                                       recomputes ? 0 : largest_offloaded, input_offloaded);
    offloaded += input_offloaded;
    const double next = i + 1 < n ? unit_forward_ms(units[i + 1]) : 0.0;
    uc.exposed_transfer_ms = exposed_ms(offloaded, bandwidth, next, options.backward_to_forward);
    cost.kept_bytes += uc.kept_bytes;
    cost.recomputed_bytes += uc.recomputed_bytes;
    cost.offloaded_bytes += uc.offloaded_bytes;
    cost.recompute_ms += uc.recompute_ms;
    cost.recompute_flops += uc.recompute_flops;
    cost.exposed_transfer_ms += uc.exposed_transfer_ms;
  }
  auto selective = [&](int i) { return i >= 0 && i < n && segment_of[i] < 0; };
  auto starts_segment = [&](int i) {
    return i < n && segment_of[i] >= 0 && a.segments[segment_of[i]].begin == i;
  };
  std::vector<std::int64_t> need(n + 1, 0), held_before(n + 1, 0);
  std::int64_t held = 0;
  for (int j = 0; j <= n; ++j) {
    std::int64_t v = 0;
    if (selective(j - 1)) v = std::max(v, output_kept[j - 1]);
    if (selective(j)) v = std::max(v, input_held[j]);
    if (starts_segment(j)) v = std::max(v, units[j].input_bytes);
    need[j] = v;
    held_before[j] = held;
    held += v;
    if (selective(j)) held += kept[j];
  }
  cost.stored_bytes = held;
  cost.peak_bytes = held;
  for (int i = 0; i < n; ++i) {
    if (!selective(i)) continue;
    cost.units[i].peak_bytes = held_before[i] + need[i] + kept[i] + output_kept[i] + transient[i];
    cost.peak_bytes = std::max(cost.peak_bytes, cost.units[i].peak_bytes);
  }
  for (const CheckpointSegment& seg : a.segments) {
    std::int64_t recompute = 0;
    for (int i = seg.begin; i < seg.end; ++i) recompute += own_bytes(units[i]);
    for (int j = seg.begin + 1; j <= seg.end; ++j)
      recompute += j < seg.end ? std::max(output_saved(units[j - 1]), units[j].input_saved_bytes)
                               : output_saved(units[j - 1]);
    const std::int64_t peak = held_before[seg.begin] + need[seg.begin] + recompute;
    for (int i = seg.begin; i < seg.end; ++i) cost.units[i].peak_bytes = peak;
    cost.peak_bytes = std::max(cost.peak_bytes, peak);
  }
  return cost;
}

std::int64_t min_activation_budget(const std::vector<ActivationUnit>& units,
                                   const ActivationPlanOptions& options) {
  check_units(units, options);
  if (units.empty()) return 0;
  const Chain c(units, options);
  return least_budget(c, evaluate_activations(units, keep_everything(units), options).peak_bytes);
}

ActivationPlan plan_activations(const std::vector<ActivationUnit>& units, std::int64_t budget_bytes,
                                const ActivationPlanOptions& options) {
  check_units(units, options);
  ActivationPlan plan;
  plan.budget_bytes = budget_bytes;
  plan.offload_available = options.link_bytes_per_second > 0;
  for (const ActivationUnit& u : units)
    for (const SavedGroup& g : u.groups) {
      plan.forward_ms += g.forward_ms;
      plan.forward_flops += g.flops;
    }
  plan.assignment = keep_everything(units);
  plan.cost = evaluate_activations(units, plan.assignment, options);
  plan.unconstrained_peak_bytes = plan.cost.peak_bytes;
  if (units.empty()) {
    plan.feasible = budget_bytes >= 0;
    plan.message = "no units to plan";
    return plan;
  }
  const Chain c(units, options);
  plan.exact = c.exact;
  plan.min_feasible_budget_bytes = least_budget(c, plan.unconstrained_peak_bytes);
  plan.feasible = budget_bytes >= plan.min_feasible_budget_bytes;
  const std::int64_t target = plan.feasible ? budget_bytes : plan.min_feasible_budget_bytes;
  ActivationAssignment best;
  bool exact = plan.exact;
  if (!best_assignment(c, target, best, exact)) {
    // Cannot happen when the bisection found the budget feasible; say so rather than lie.
    plan.feasible = false;
    plan.message =
        "activation planner: internal inconsistency, no plan found within a feasible "
        "budget; everything is kept";
    return plan;
  }
  plan.exact = exact;
  if (plan.offload_available) keep_needless_offloads(units, target, options, best);
  plan.assignment = std::move(best);
  plan.cost = evaluate_activations(units, plan.assignment, options);
  plan.message = plan_text(units, plan);
  if (!plan.feasible)
    plan.message = fmt::format(
        "no plan fits {} of activations: the least any plan needs is {} ({} bytes); raise the "
        "budget to at least that, or lower the batch size or use mixed precision; the plan that "
        "needs the least: {}",
        bytes_text(budget_bytes), bytes_text(plan.min_feasible_budget_bytes),
        plan.min_feasible_budget_bytes, plan.message);
  if (!plan.offload_available && plan.unconstrained_peak_bytes > budget_bytes)
    plan.message +=
        "; nothing offloaded: the host link's bandwidth was not measured, so saved tensors are "
        "kept or recomputed";
  return plan;
}

}  // namespace fathom
