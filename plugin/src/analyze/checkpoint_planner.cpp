#include <fathom/checkpoint_planner.h>
#include <fathom/error.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "analyze/pareto_front.h"
#include "base/bytes_text.h"

namespace fathom {
namespace {

using detail::bytes_text;
using detail::FrontPoint;
using detail::FrontSource;
using detail::merge_fronts;
using detail::thin_front;

// The chain as the model reads it: boundary j's bytes, the parts of it blocks keep, and prefix
// sums for the cost of recomputing any segment in O(1).
struct Model {
  const std::vector<ChainBlock>& chain;
  int max_segment = 0;                // 0: any length
  std::vector<std::int64_t> own_sum;  // own bytes of blocks [0, i)
  std::vector<std::int64_t> mid_sum;  // boundaries 1..m-1 kept inside a recomputed segment
  std::vector<double> time_sum;       // forward time of blocks [0, i)

  explicit Model(const std::vector<ChainBlock>& c, int max_segment_blocks = 0)
      : chain(c), max_segment(max_segment_blocks) {
    const int count = n();
    own_sum.assign(count + 1, 0);
    mid_sum.assign(count + 1, 0);
    time_sum.assign(count + 1, 0.0);
    for (int i = 0; i < count; ++i) {
      own_sum[i + 1] = own_sum[i] + chain[i].own_bytes;
      time_sum[i + 1] = time_sum[i] + chain[i].forward_ms;
      mid_sum[i + 1] = mid_sum[i] + (i >= 1 ? std::max(kept_by_before(i), kept_by_after(i)) : 0);
    }
  }
  int n() const { return static_cast<int>(chain.size()); }
  // The last block a segment starting at block j may end before (exclusive).
  int segment_limit(int j) const { return max_segment > 0 ? std::min(n(), j + max_segment) : n(); }
  // The first block a segment ending before block k may start at.
  int segment_start(int k) const { return max_segment > 0 ? std::max(0, k - max_segment) : 0; }
  std::int64_t boundary(int j) const {
    return j < n() ? chain[j].input_bytes : chain[n() - 1].output_bytes;
  }
  // Kept of boundary j by the block before it (when plain), and by the block after it.
  std::int64_t kept_by_before(int j) const { return j > 0 ? chain[j - 1].output_saved_bytes : 0; }
  std::int64_t kept_by_after(int j) const { return j < n() ? chain[j].input_saved_bytes : 0; }
  // R of the segment of blocks [j, k): what recomputing it holds beyond its input.
  std::int64_t recompute_bytes(int j, int k) const {
    return own_sum[k] - own_sum[j] + (mid_sum[k] - mid_sum[j + 1]) + kept_by_before(k);
  }
  double recompute_ms(int j, int k) const { return time_sum[k] - time_sum[j]; }
  // Boundary j's bytes when the block before it is plain (or not) and a plain block follows.
  std::int64_t need_plain_next(int j, bool last_plain) const {
    return std::max(last_plain ? kept_by_before(j) : 0, kept_by_after(j));
  }
  // ... and when a checkpointed segment starts after it.
  std::int64_t need_segment_next(int j, bool last_plain) const {
    return std::max(last_plain ? kept_by_before(j) : 0, boundary(j));
  }
};

int state_of(int j, bool last_plain) { return 2 * j + (last_plain ? 1 : 0); }

std::int64_t final_mem(const Model& m, bool last_plain, std::int64_t mem) {
  return mem + (last_plain ? m.kept_by_before(m.n()) : 0);
}

constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();

// extra[state]: the least memory, above what a point holds on reaching the state, that the rest
// of the chain needs at its most demanding moment. A point holding more than budget - extra
// cannot finish within the budget, whatever it does next.
std::vector<std::int64_t> least_extra(const Model& m) {
  const int n = m.n();
  std::vector<std::int64_t> extra(2 * (n + 1), kNone);
  extra[state_of(n, false)] = 0;
  extra[state_of(n, true)] = m.kept_by_before(n);
  for (int j = n - 1; j >= 0; --j) {
    for (bool lp : {false, true}) {
      std::int64_t best =
          m.need_plain_next(j, lp) + m.chain[j].own_bytes + extra[state_of(j + 1, true)];
      const std::int64_t need = m.need_segment_next(j, lp);
      for (int k = j + 1; k <= m.segment_limit(j); ++k)
        best = std::min(best, need + std::max(m.recompute_bytes(j, k), extra[state_of(k, false)]));
      extra[state_of(j, lp)] = best;
    }
  }
  return extra;
}

// Whether any plan fits: the least memory held per state is all that matters for that.
bool feasible(const Model& m, std::int64_t budget) {
  const int n = m.n();
  std::vector<std::int64_t> least(2 * (n + 1), kNone);
  least[state_of(0, false)] = 0;
  for (int j = 0; j < n; ++j) {
    for (bool lp : {false, true}) {
      const std::int64_t mem = least[state_of(j, lp)];
      if (mem == kNone) continue;
      const std::int64_t plain = mem + m.need_plain_next(j, lp) + m.chain[j].own_bytes;
      if (plain <= budget)
        least[state_of(j + 1, true)] = std::min(least[state_of(j + 1, true)], plain);
      const std::int64_t held = mem + m.need_segment_next(j, lp);
      for (int k = j + 1; k <= m.segment_limit(j) && held + m.recompute_bytes(j, k) <= budget; ++k)
        least[state_of(k, false)] = std::min(least[state_of(k, false)], held);
    }
  }
  return (least[state_of(n, false)] != kNone &&
          final_mem(m, false, least[state_of(n, false)]) <= budget) ||
         (least[state_of(n, true)] != kNone &&
          final_mem(m, true, least[state_of(n, true)]) <= budget);
}

using Point = FrontPoint;
using Source = FrontSource;
constexpr int kPlain = 0, kSegment = 1;  // how a point was reached

void check_chain(const std::vector<ChainBlock>& chain) {
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const ChainBlock& b = chain[i];
    if (b.own_bytes < 0 || b.input_saved_bytes < 0 || b.output_saved_bytes < 0 ||
        b.input_bytes < 0 || b.output_bytes < 0 || !(b.forward_ms >= 0)) {
      throw Error(
          fmt::format("checkpoint planner: block {} ('{}') has a negative size or time; "
                      "measure it again",
                      i, b.name));
    }
  }
}

}  // namespace

PlanCost evaluate_plan(const std::vector<ChainBlock>& chain,
                       const std::vector<CheckpointSegment>& segments) {
  const Model m(chain);
  const int n = m.n();
  std::vector<int> segment_of(n, -1);
  int previous_end = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const CheckpointSegment& seg = segments[s];
    if (seg.begin < previous_end || seg.begin >= seg.end || seg.end > n) {
      throw Error(
          fmt::format("checkpoint segment [{}, {}) is empty, overlaps the one before, or "
                      "lies outside the chain of {} blocks; give ordered, disjoint, "
                      "non-empty ranges",
                      seg.begin, seg.end, n));
    }
    for (int i = seg.begin; i < seg.end; ++i) segment_of[i] = static_cast<int>(s);
    previous_end = seg.end;
  }
  auto plain = [&](int i) { return i >= 0 && i < n && segment_of[i] < 0; };
  auto starts_segment = [&](int i) {
    return i < n && segment_of[i] >= 0 && segments[segment_of[i]].begin == i;
  };
  std::vector<std::int64_t> need(n + 1, 0);
  for (int j = 0; j <= n; ++j) {
    std::int64_t v = 0;
    if (plain(j - 1)) v = std::max(v, m.kept_by_before(j));
    if (plain(j)) v = std::max(v, m.kept_by_after(j));
    if (starts_segment(j)) v = std::max(v, m.boundary(j));
    need[j] = v;
  }
  PlanCost cost;
  // held[j]: own bytes of plain blocks before j plus need of boundaries before j.
  std::int64_t held = 0;
  std::vector<std::int64_t> held_before(n + 1, 0);
  for (int j = 0; j <= n; ++j) {
    held_before[j] = held;
    held += need[j];
    if (plain(j)) held += chain[j].own_bytes;
  }
  cost.stored_bytes = held;
  cost.peak_bytes = held;
  for (const CheckpointSegment& seg : segments) {
    std::int64_t recompute = 0;
    for (int i = seg.begin; i < seg.end; ++i) {
      recompute += chain[i].own_bytes;
      cost.recompute_ms += chain[i].forward_ms;
    }
    for (int j = seg.begin + 1; j <= seg.end; ++j) {
      recompute +=
          j < seg.end ? std::max(m.kept_by_before(j), m.kept_by_after(j)) : m.kept_by_before(j);
    }
    // Everything before the segment, its input included.
    const std::int64_t before = held_before[seg.begin] + need[seg.begin];
    cost.peak_bytes = std::max(cost.peak_bytes, before + recompute);
  }
  return cost;
}

std::int64_t min_feasible_budget(const std::vector<ChainBlock>& chain, int max_segment_blocks) {
  check_chain(chain);
  if (chain.empty()) return 0;
  const Model m(chain, max_segment_blocks);
  std::int64_t hi = evaluate_plan(chain, {}).peak_bytes;  // no checkpointing always fits its peak
  std::int64_t lo = -1;                                   // infeasible
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (feasible(m, mid) ? hi : lo) = mid;
  }
  return hi;
}

CheckpointPlan plan_checkpoints(const std::vector<ChainBlock>& chain, std::int64_t budget_bytes,
                                int max_segment_blocks) {
  check_chain(chain);
  CheckpointPlan plan;
  plan.budget_bytes = budget_bytes;
  for (const ChainBlock& b : chain) plan.forward_ms += b.forward_ms;
  const PlanCost plain = evaluate_plan(chain, {});
  plan.unconstrained_peak_bytes = plain.peak_bytes;
  plan.min_feasible_budget_bytes = min_feasible_budget(chain, max_segment_blocks);
  plan.predicted_peak_bytes = plain.peak_bytes;
  plan.stored_bytes = plain.stored_bytes;
  if (budget_bytes < plan.min_feasible_budget_bytes) {
    plan.message = fmt::format(
        "no checkpointing plan fits {} of activations: the least any plan needs is {} ({} bytes); "
        "raise the budget to at least that, or lower the batch size or use mixed precision",
        bytes_text(budget_bytes), bytes_text(plan.min_feasible_budget_bytes),
        plan.min_feasible_budget_bytes);
    return plan;
  }
  const Model m(chain, max_segment_blocks);
  const int n = m.n();
  const std::vector<std::int64_t> extra = least_extra(m);
  std::vector<std::vector<Point>> fronts(2 * (n + 1));
  fronts[state_of(0, false)].push_back(Point{});
  std::vector<Source> sources;
  for (int k = 1; k <= n; ++k) {
    // Block k-1 plain.
    sources.clear();
    for (bool lp : {false, true}) {
      const auto& f = fronts[state_of(k - 1, lp)];
      sources.push_back(Source{&f, 0, static_cast<int>(f.size()),
                               m.need_plain_next(k - 1, lp) + chain[k - 1].own_bytes, 0.0,
                               state_of(k - 1, lp), kPlain});
    }
    fronts[state_of(k, true)] = merge_fronts(sources, budget_bytes - extra[state_of(k, true)]);
    if (thin_front(fronts[state_of(k, true)], budget_bytes)) plan.exact = false;
    // Blocks j..k-1 one checkpointed segment: the points that can hold its recompute.
    sources.clear();
    for (int j = m.segment_start(k); j < k; ++j) {
      const std::int64_t recompute = m.recompute_bytes(j, k);
      for (bool lp : {false, true}) {
        const auto& f = fronts[state_of(j, lp)];
        const std::int64_t need = m.need_segment_next(j, lp);
        const std::int64_t limit = budget_bytes - need - recompute;
        const int end =
            static_cast<int>(std::partition_point(f.begin(), f.end(),
                                                  [&](const Point& p) { return p.mem <= limit; }) -
                             f.begin());
        if (end > 0)
          sources.push_back(
              Source{&f, 0, end, need, m.recompute_ms(j, k), state_of(j, lp), kSegment});
      }
    }
    fronts[state_of(k, false)] = merge_fronts(sources, budget_bytes - extra[state_of(k, false)]);
    if (thin_front(fronts[state_of(k, false)], budget_bytes)) plan.exact = false;
  }
  int best_state = -1, best_point = -1;
  double best_time = std::numeric_limits<double>::infinity();
  std::int64_t best_mem = kNone;
  for (bool lp : {false, true}) {
    const int s = state_of(n, lp);
    for (int p = 0; p < static_cast<int>(fronts[s].size()); ++p) {
      const Point& at = fronts[s][p];
      const std::int64_t mem = final_mem(m, lp, at.mem);
      if (mem > budget_bytes) continue;
      if (at.time < best_time || (at.time == best_time && mem < best_mem)) {
        best_time = at.time;
        best_mem = mem;
        best_state = s;
        best_point = p;
      }
    }
  }
  if (best_state < 0) {  // cannot happen when the bisection said feasible; say so rather than lie
    plan.message =
        "checkpoint planner: internal inconsistency, no plan found within a feasible budget";
    return plan;
  }
  for (int s = best_state, p = best_point; fronts[s][p].from_state >= 0;) {
    const Point& at = fronts[s][p];
    if (at.how == kSegment) plan.segments.push_back(CheckpointSegment{at.from_state / 2, s / 2});
    s = at.from_state;
    p = at.from_point;
  }
  std::reverse(plan.segments.begin(), plan.segments.end());
  const PlanCost cost = evaluate_plan(chain, plan.segments);
  plan.feasible = true;
  plan.predicted_peak_bytes = cost.peak_bytes;
  plan.stored_bytes = cost.stored_bytes;
  plan.recompute_ms = cost.recompute_ms;
  int checkpointed = 0;
  for (const CheckpointSegment& s : plan.segments) checkpointed += s.end - s.begin;
  plan.message =
      plan.segments.empty()
          ? fmt::format("no checkpointing needed: the peak, {}, fits the budget of {}",
                        bytes_text(cost.peak_bytes), bytes_text(budget_bytes))
          : fmt::format(
                "checkpoint {} of {} blocks in {} segment{}: predicted peak {} (budget {}, "
                "{} without checkpointing), recompute {:.3g} ms ({:.0f}% of the forward)",
                checkpointed, n, plan.segments.size(), plan.segments.size() == 1 ? "" : "s",
                bytes_text(cost.peak_bytes), bytes_text(budget_bytes), bytes_text(plain.peak_bytes),
                cost.recompute_ms,
                plan.forward_ms > 0 ? 100.0 * cost.recompute_ms / plan.forward_ms : 0.0);
  return plan;
}

std::vector<CheckpointSegment> equal_segments(int blocks, int k) {
  std::vector<CheckpointSegment> out;
  if (blocks <= 0) return out;
  k = std::clamp(k, 1, blocks);
  const int base = blocks / k, extra = blocks % k;
  int begin = 0;
  for (int s = 0; s < k - 1; ++s) {  // the last segment stays plain
    const int size = base + (s < extra ? 1 : 0);
    out.push_back(CheckpointSegment{begin, begin + size});
    begin += size;
  }
  return out;
}

std::vector<CheckpointSegment> sqrt_segments(int blocks) {
  if (blocks <= 0) return {};
  return equal_segments(blocks,
                        static_cast<int>(std::ceil(std::sqrt(static_cast<double>(blocks)))));
}

FusedChain fuse_aliasing_blocks(const std::vector<ChainBlock>& chain) {
  FusedChain f;
  for (int i = 0; i < static_cast<int>(chain.size()); ++i) {
    const ChainBlock& b = chain[i];
    if (b.aliases_input && !f.blocks.empty()) {
      // Its input, its output and its predecessor's output are one storage.
      ChainBlock& a = f.blocks.back();
      a.name += "+" + b.name;
      a.own_bytes += b.own_bytes;
      a.output_saved_bytes =
          std::max({a.output_saved_bytes, b.input_saved_bytes, b.output_saved_bytes});
      a.output_bytes = b.output_bytes;
      a.forward_ms += b.forward_ms;
      f.groups.back().push_back(i);
      continue;
    }
    f.blocks.push_back(b);
    f.blocks.back().aliases_input = false;
    f.groups.push_back({i});
  }
  // A leading aliasing block has no predecessor: merge it into its successor.
  // Every block of that first group aliases the chain's input, so all of them are one storage.
  if (!chain.empty() && chain.front().aliases_input && f.blocks.size() > 1) {
    ChainBlock first = f.blocks[0];
    ChainBlock& next = f.blocks[1];
    next.name = first.name + "+" + next.name;
    next.own_bytes += first.own_bytes;
    next.input_saved_bytes =
        std::max({first.input_saved_bytes, first.output_saved_bytes, next.input_saved_bytes});
    next.input_bytes = first.input_bytes;
    next.forward_ms += first.forward_ms;
    std::vector<int> merged = f.groups[0];
    merged.insert(merged.end(), f.groups[1].begin(), f.groups[1].end());
    f.groups[1] = merged;
    f.blocks.erase(f.blocks.begin());
    f.groups.erase(f.groups.begin());
  }
  return f;
}

std::vector<CheckpointSegment> unfuse_segments(const FusedChain& fused,
                                               const std::vector<CheckpointSegment>& segments) {
  std::vector<CheckpointSegment> out;
  for (const CheckpointSegment& s : segments) {
    out.push_back(
        CheckpointSegment{fused.groups.at(s.begin).front(), fused.groups.at(s.end - 1).back() + 1});
  }
  return out;
}

}  // namespace fathom
