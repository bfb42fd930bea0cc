// The aggregator's held window: records read by device, then start, ties in arrival order, with
// no sort of the whole window.
#include "aggregate/held_window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace fathom::aggregation {
namespace {

HeldGpu held(std::int32_t device, std::int64_t start, std::uint64_t arrival) {
  HeldGpu h;
  h.device = device;
  h.start = start;
  h.end = start + 10;
  h.correlation = arrival;  // the test's name for the record
  return h;
}

// What the sweep must read: the arrivals stably sorted by (device, start).
std::vector<std::uint64_t> expected_order(std::vector<HeldGpu> in) {
  std::stable_sort(in.begin(), in.end(), [](const HeldGpu& a, const HeldGpu& b) {
    return a.device != b.device ? a.device < b.device : a.start < b.start;
  });
  std::vector<std::uint64_t> ids;
  for (const HeldGpu& h : in) ids.push_back(h.correlation);
  return ids;
}

std::vector<std::uint64_t> read_order(HeldWindow& w) {
  std::vector<std::uint64_t> ids;
  w.for_each_in_order([&](const HeldGpu& h) { ids.push_back(h.correlation); });
  return ids;
}

// Copies delivered after the kernels that ran after them, starts that tie (inside the run,
// between the run and the late records, among the late records), three devices interleaved.
TEST(HeldWindow, ReadsByDeviceThenStartWithTiesInArrivalOrder) {
  std::vector<HeldGpu> in;
  std::uint64_t n = 0;
  for (std::int64_t s : {100, 200, 200, 300, 400, 500}) in.push_back(held(0, s, ++n));
  for (std::int64_t s : {150, 200, 300, 300, 50, 500, 450}) in.push_back(held(0, s, ++n));
  in.push_back(held(2, 10, ++n));
  in.push_back(held(1, 70, ++n));
  in.push_back(held(2, 5, ++n));
  in.push_back(held(0, 600, ++n));
  in.push_back(held(0, 250, ++n));
  HeldWindow w;
  for (const HeldGpu& h : in) w.push(h);
  EXPECT_EQ(w.size(), in.size());
  EXPECT_EQ(read_order(w), expected_order(in));
}

TEST(HeldWindow, NearlyOrderedStreamsOfManyWindowsMatchAStableSort) {
  std::mt19937_64 rng(18);
  HeldWindow w;  // reused: clear() keeps the lanes and their memory
  for (int window = 0; window < 50; ++window) {
    std::vector<HeldGpu> in;
    std::int64_t t = window * 1'000'000;
    for (std::uint64_t i = 0; i < 2000; ++i) {
      t += static_cast<std::int64_t>(rng() % 4);  // steps of 0 make ties
      const auto device = static_cast<std::int32_t>(rng() % 5 == 0 ? rng() % 3 : 0);
      // One in eight arrives late: it ran up to 200 ns before the last one.
      const std::int64_t start = rng() % 8 == 0 ? t - static_cast<std::int64_t>(rng() % 200) : t;
      in.push_back(held(device, start, i));
    }
    for (const HeldGpu& h : in) w.push(h);
    ASSERT_EQ(read_order(w), expected_order(in)) << "window " << window;
    std::size_t seen = 0;
    w.for_each([&](HeldGpu&) { ++seen; });
    EXPECT_EQ(seen, in.size());
    w.clear();
    EXPECT_TRUE(w.empty());
    EXPECT_TRUE(read_order(w).empty());
  }
}

}  // namespace
}  // namespace fathom::aggregation
