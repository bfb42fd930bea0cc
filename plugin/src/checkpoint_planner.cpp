#include <fathom/checkpoint_planner.h>
#include <fathom/error.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace fathom {
namespace {

// The chain as the model reads it: boundary j's bytes and the parts of it blocks keep.
struct Model {
  const std::vector<ChainBlock>& chain;
  int n() const { return static_cast<int>(chain.size()); }
  std::int64_t boundary(int j) const {
    return j < n() ? chain[j].input_bytes : chain[n() - 1].output_bytes;
  }
  // Kept of boundary j by the block before it (when plain), and by the block after it.
  std::int64_t kept_by_before(int j) const { return j > 0 ? chain[j - 1].output_saved_bytes : 0; }
  std::int64_t kept_by_after(int j) const { return j < n() ? chain[j].input_saved_bytes : 0; }
};

std::string bytes_text(std::int64_t b) {
  const double v = static_cast<double>(b);
  if (v >= 1073741824.0) return fmt::format("{:.2f} GiB", v / 1073741824.0);
  if (v >= 1048576.0) return fmt::format("{:.1f} MiB", v / 1048576.0);
  if (v >= 1024.0) return fmt::format("{:.1f} KiB", v / 1024.0);
  return fmt::format("{} B", b);
}

struct Point {
  std::int64_t mem = 0;  // held so far: own bytes of plain blocks, boundaries already settled
  double time = 0;       // recompute time so far
  int from_state = -1;
  int from_point = -1;
  int segment_end = -1;  // -1: reached by a plain block; else the checkpointed segment ended here
};

int state_of(int j, bool last_plain) { return 2 * j + (last_plain ? 1 : 0); }

// Keeps the points no other point beats in both memory and time.
void prune(std::vector<Point>& front) {
  std::sort(front.begin(), front.end(), [](const Point& a, const Point& b) {
    return a.mem != b.mem ? a.mem < b.mem : a.time < b.time;
  });
  std::vector<Point> kept;
  double best = std::numeric_limits<double>::infinity();
  for (const Point& p : front) {
    if (p.time < best) {
      kept.push_back(p);
      best = p.time;
    }
  }
  front.swap(kept);
}

// Visits every move out of state (j, last_plain) holding mem bytes:
// plain(mem', to_state) and segment(end, mem_held_before, mem', recompute_ms, to_state).
template <typename Plain, typename Segment>
void moves(const Model& m, int j, bool last_plain, std::int64_t mem, std::int64_t budget,
           Plain&& plain, Segment&& segment) {
  const int n = m.n();
  if (j >= n) return;
  const std::int64_t before = last_plain ? m.kept_by_before(j) : 0;
  const std::int64_t plain_mem =
      mem + std::max(before, m.kept_by_after(j)) + m.chain[j].own_bytes;
  if (plain_mem <= budget) plain(plain_mem, state_of(j + 1, true));
  const std::int64_t held = mem + std::max(before, m.boundary(j));
  if (held > budget) return;
  std::int64_t inner = 0;  // recomputed bytes of blocks j..k-1 but boundary k
  double time = 0;
  for (int k = j + 1; k <= n; ++k) {
    inner += m.chain[k - 1].own_bytes;
    if (k - 1 > j) inner += std::max(m.kept_by_before(k - 1), m.kept_by_after(k - 1));
    time += m.chain[k - 1].forward_ms;
    const std::int64_t recompute = inner + m.kept_by_before(k);
    if (held + recompute > budget) break;  // longer segments only recompute more
    segment(k, held, time, state_of(k, false));
  }
}

std::int64_t final_mem(const Model& m, int state, std::int64_t mem) {
  return mem + ((state & 1) ? m.kept_by_before(m.n()) : 0);
}

bool feasible(const Model& m, std::int64_t budget) {
  const int n = m.n();
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int64_t> least(2 * (n + 1), kNone);
  least[state_of(0, false)] = 0;
  for (int j = 0; j < n; ++j) {
    for (bool lp : {false, true}) {
      const std::int64_t mem = least[state_of(j, lp)];
      if (mem == kNone) continue;
      moves(
          m, j, lp, mem, budget,
          [&](std::int64_t to_mem, int to) { least[to] = std::min(least[to], to_mem); },
          [&](int, std::int64_t held, double, int to) { least[to] = std::min(least[to], held); });
    }
  }
  for (bool lp : {false, true}) {
    const int s = state_of(n, lp);
    if (least[s] != kNone && final_mem(m, s, least[s]) <= budget) return true;
  }
  return false;
}

void check_chain(const std::vector<ChainBlock>& chain) {
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const ChainBlock& b = chain[i];
    if (b.own_bytes < 0 || b.input_saved_bytes < 0 || b.output_saved_bytes < 0 || b.input_bytes < 0 ||
        b.output_bytes < 0 || !(b.forward_ms >= 0)) {
      throw Error(fmt::format("checkpoint planner: block {} ('{}') has a negative size or time; "
                              "measure it again",
                              i, b.name));
    }
  }
}

}  // namespace

PlanCost evaluate_plan(const std::vector<ChainBlock>& chain,
                       const std::vector<CheckpointSegment>& segments) {
  const Model m{chain};
  const int n = m.n();
  std::vector<int> segment_of(n, -1);
  int previous_end = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const CheckpointSegment& seg = segments[s];
    if (seg.begin < previous_end || seg.begin >= seg.end || seg.end > n) {
      throw Error(fmt::format("checkpoint segment [{}, {}) is empty, overlaps the one before, or "
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
      recompute += j < seg.end ? std::max(m.kept_by_before(j), m.kept_by_after(j)) : m.kept_by_before(j);
    }
    // Everything before the segment, its input included.
    const std::int64_t before = held_before[seg.begin] + need[seg.begin];
    cost.peak_bytes = std::max(cost.peak_bytes, before + recompute);
  }
  return cost;
}

std::int64_t min_feasible_budget(const std::vector<ChainBlock>& chain) {
  check_chain(chain);
  if (chain.empty()) return 0;
  const Model m{chain};
  std::int64_t hi = evaluate_plan(chain, {}).peak_bytes;  // no checkpointing always fits its peak
  std::int64_t lo = -1;                                   // infeasible
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (feasible(m, mid) ? hi : lo) = mid;
  }
  return hi;
}

CheckpointPlan plan_checkpoints(const std::vector<ChainBlock>& chain, std::int64_t budget_bytes) {
  check_chain(chain);
  CheckpointPlan plan;
  plan.budget_bytes = budget_bytes;
  for (const ChainBlock& b : chain) plan.forward_ms += b.forward_ms;
  const PlanCost plain = evaluate_plan(chain, {});
  plan.unconstrained_peak_bytes = plain.peak_bytes;
  plan.min_feasible_budget_bytes = min_feasible_budget(chain);
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
  const Model m{chain};
  const int n = m.n();
  std::vector<std::vector<Point>> fronts(2 * (n + 1));
  fronts[state_of(0, false)].push_back(Point{});
  for (int j = 0; j < n; ++j) {
    for (bool lp : {false, true}) {
      const int from = state_of(j, lp);
      std::vector<Point>& front = fronts[from];
      prune(front);
      for (int p = 0; p < static_cast<int>(front.size()); ++p) {
        const Point at = front[p];
        moves(
            m, j, lp, at.mem, budget_bytes,
            [&](std::int64_t mem, int to) { fronts[to].push_back(Point{mem, at.time, from, p, -1}); },
            [&](int end, std::int64_t held, double ms, int to) {
              fronts[to].push_back(Point{held, at.time + ms, from, p, end});
            });
      }
    }
  }
  int best_state = -1, best_point = -1;
  double best_time = std::numeric_limits<double>::infinity();
  std::int64_t best_mem = std::numeric_limits<std::int64_t>::max();
  for (bool lp : {false, true}) {
    const int s = state_of(n, lp);
    prune(fronts[s]);
    for (int p = 0; p < static_cast<int>(fronts[s].size()); ++p) {
      const Point& at = fronts[s][p];
      const std::int64_t mem = final_mem(m, s, at.mem);
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
    plan.message = "checkpoint planner: internal inconsistency, no plan found within a feasible budget";
    return plan;
  }
  for (int s = best_state, p = best_point; fronts[s][p].from_state >= 0;) {
    const Point& at = fronts[s][p];
    if (at.segment_end >= 0) {
      // The segment began at the block of the state it came from.
      plan.segments.push_back(CheckpointSegment{at.from_state / 2, at.segment_end});
    }
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
          : fmt::format("checkpoint {} of {} blocks in {} segment{}: predicted peak {} (budget {}, "
                        "{} without checkpointing), recompute {:.3g} ms ({:.0f}% of the forward)",
                        checkpointed, n, plan.segments.size(), plan.segments.size() == 1 ? "" : "s",
                        bytes_text(cost.peak_bytes), bytes_text(budget_bytes),
                        bytes_text(plain.peak_bytes), cost.recompute_ms,
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
  return equal_segments(blocks, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(blocks)))));
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
    out.push_back(CheckpointSegment{fused.groups.at(s.begin).front(), fused.groups.at(s.end - 1).back() + 1});
  }
  return out;
}

}  // namespace fathom
