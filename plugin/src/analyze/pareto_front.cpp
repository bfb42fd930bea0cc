#include "analyze/pareto_front.h"

#include <algorithm>
#include <limits>

namespace fathom::detail {

bool thin_front(std::vector<FrontPoint>& front, std::int64_t max_mem, std::size_t cap) {
  cap = std::max<std::size_t>(cap, 4);
  if (front.size() <= cap) return false;
  const std::int64_t low = front.front().mem;
  const std::int64_t width =
      std::max<std::int64_t>(1, (max_mem - low) / static_cast<std::int64_t>(cap / 2) + 1);
  std::vector<FrontPoint> kept;
  for (std::size_t i = 0; i < front.size(); ++i) {
    const bool last_in_bucket =
        i + 1 == front.size() || (front[i + 1].mem - low) / width != (front[i].mem - low) / width;
    if (last_in_bucket) kept.push_back(front[i]);
  }
  front.swap(kept);
  return true;
}

int points_within(const std::vector<FrontPoint>& front, std::int64_t limit) {
  return static_cast<int>(
      std::partition_point(front.begin(), front.end(),
                           [&](const FrontPoint& p) { return p.mem <= limit; }) -
      front.begin());
}

namespace {

// A source in the heap, its head's shifted values at hand: the comparisons read no front.
struct Head {
  std::int64_t mem;
  double time;
  FrontSource* source;
};

bool read_head(Head& h) {
  const FrontSource& s = *h.source;
  if (s.pos >= s.end) return false;
  h.mem = s.head_mem();
  h.time = s.head_time();
  return true;
}

}  // namespace

std::vector<FrontPoint> merge_fronts(std::vector<FrontSource>& sources, std::int64_t max_mem) {
  auto later = [](const Head& a, const Head& b) {
    return a.mem != b.mem ? a.mem > b.mem : a.time > b.time;
  };
  std::vector<Head> heap;
  heap.reserve(sources.size());
  for (FrontSource& s : sources) {
    Head h{0, 0, &s};
    if (read_head(h) && h.mem <= max_mem) heap.push_back(h);
  }
  std::make_heap(heap.begin(), heap.end(), later);
  std::vector<FrontPoint> out;
  double best = std::numeric_limits<double>::infinity();
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Head& h = heap.back();
    FrontSource& s = *h.source;
    if (h.mem > max_mem) {
      heap.pop_back();
      continue;
    }
    if (h.time < best) {
      best = h.time;
      out.push_back(FrontPoint{h.mem, best, s.state, s.pos, s.how});
      ++s.pos;
    } else {
      // Times fall along the source: skip to the first point that beats the best so far.
      const auto& f = *s.front;
      const double below = best - s.time;
      s.pos = static_cast<int>(
          std::partition_point(f.begin() + s.pos, f.begin() + s.end,
                               [&](const FrontPoint& p) { return p.time >= below; }) -
          f.begin());
      // Floating-point: the shifted time of the point found must beat best, or nothing does.
      while (s.pos < s.end && !(s.head_time() < best)) ++s.pos;
    }
    if (read_head(h)) {
      std::push_heap(heap.begin(), heap.end(), later);
    } else {
      heap.pop_back();
    }
  }
  return out;
}

}  // namespace fathom::detail
