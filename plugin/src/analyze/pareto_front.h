#pragma once
// The chain planners' Pareto fronts of (bytes held, extra time), merged from shifted sources: the
// dynamic programs of checkpoint_planner.cpp and activation_plan.cpp build each state's front by
// merging the fronts of the states that reach it, each shifted by the step taken.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fathom::detail {

// A front holds its points with memory strictly ascending and time strictly descending.
struct FrontPoint {
  std::int64_t mem = 0;  // held so far
  double time = 0;       // extra time so far
  int from_state = -1;
  int from_point = -1;
  int how = 0;  // the caller's tag for the step that reached it (which choice, which segment)
};

// A source's points [pos, end) shifted by (mem, time): still a front, so the union of sources is
// merged in memory order, and a run of points another source beats is skipped by bisection.
struct FrontSource {
  const std::vector<FrontPoint>* front;
  int pos, end;
  std::int64_t mem;
  double time;
  int state;
  int how;
  std::int64_t head_mem() const { return (*front)[pos].mem + mem; }
  double head_time() const { return (*front)[pos].time + time; }
};

// The front of the union of the sources, without points holding more than max_mem.
std::vector<FrontPoint> merge_fronts(std::vector<FrontSource>& sources, std::int64_t max_mem);

// Fronts beyond cap points (chains far longer than 200 blocks with all-distinct sizes and
// times) are thinned to one point per memory bucket, cap / 2 buckets: the one with the least
// time, which holds at most one bucket width more than the points it stands for. True when it
// thinned.
inline constexpr std::size_t kFrontCap = 8192;
bool thin_front(std::vector<FrontPoint>& front, std::int64_t max_mem, std::size_t cap = kFrontCap);

// The number of points of the front holding at most limit bytes.
int points_within(const std::vector<FrontPoint>& front, std::int64_t limit);

}  // namespace fathom::detail
