#include "aggregate/memory_peak_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace fathom {
namespace {

// A caching allocator's counters in miniature, moved the way c10's are: an allocation is read
// (trace callback) before it is counted, a free after; segments are counted, then read.
class Counters {
 public:
  explicit Counters(int device = 0, std::int64_t resident = 0) {
    r_.device = device;
    r_.allocated = r_.allocated_total = resident;
    r_.reserved = resident;
  }

  // Where the allocator's readings go; the tests stand for the trace tracker's route.
  void follow(MemoryPeakTracker* t) { trackers_.push_back(t); }

  void alloc(std::int64_t bytes) {
    if (r_.allocated + bytes > r_.reserved) {
      r_.reserved = r_.allocated + bytes;  // a segment just big enough
      notify();                            // SEGMENT_ALLOC
    }
    notify();  // ALLOC, before the bytes count
    r_.allocated += bytes;
    r_.allocated_total += bytes;
    true_peak_ = std::max(true_peak_, r_.allocated);
  }
  void free(std::int64_t bytes) {
    r_.allocated -= bytes;
    r_.freed_total += bytes;
    notify();  // FREE_REQUESTED, after
  }
  void empty_cache() {
    notify();  // SEGMENT_FREE, before
    r_.reserved = r_.allocated;
  }
  void retry() { ++r_.alloc_retries; }
  void reset_accumulated() { r_.allocated_total = r_.freed_total = r_.alloc_retries = r_.ooms = 0; }

  AllocatorReading now() const { return r_; }
  std::int64_t true_peak() const { return true_peak_; }

 private:
  void notify() {
    for (MemoryPeakTracker* t : trackers_) t->observe(r_);
  }
  AllocatorReading r_;
  std::int64_t true_peak_ = 0;
  std::vector<MemoryPeakTracker*> trackers_;
};

constexpr std::int64_t MiB = 1 << 20;

TEST(MemoryPeakTracker, PeaksPerIntervalFromAnEventStream) {
  Counters c(0, 64 * MiB);
  MemoryPeakTracker t(0);
  c.follow(&t);

  const int fwd = t.open(c.now());
  c.alloc(32 * MiB);
  c.alloc(32 * MiB);
  c.alloc(32 * MiB);  // 160: the last allocation is counted after its own reading
  c.free(32 * MiB);
  c.free(32 * MiB);
  const auto forward = t.close(fwd, c.now());

  const int bwd = t.open(c.now());  // 96 live
  c.alloc(16 * MiB);                // 112
  c.free(32 * MiB);
  c.free(16 * MiB);
  const auto backward = t.close(bwd, c.now());

  ASSERT_TRUE(forward && backward);
  EXPECT_EQ(forward->peak_allocated_bytes, 160 * MiB);
  EXPECT_EQ(forward->peak_reserved_bytes, 160 * MiB);
  EXPECT_EQ(backward->peak_allocated_bytes, 112 * MiB);
  EXPECT_EQ(backward->peak_reserved_bytes, 160 * MiB);  // the cache keeps the segments
}

TEST(MemoryPeakTracker, AnAllocationJustBeforeTheEndCountsInItsInterval) {
  // No reading comes after the last allocation until the boundary: only the boundary's
  // reading shows it, and it must land in the interval that is ending.
  Counters c(0, 0);
  MemoryPeakTracker t(0);
  c.follow(&t);
  const int a = t.open(c.now());
  c.alloc(8 * MiB);
  const auto first = t.close(a, c.now());
  const int b = t.open(c.now());
  c.free(8 * MiB);
  const auto second = t.close(b, c.now());
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->peak_allocated_bytes, 8 * MiB);
  EXPECT_EQ(second->peak_allocated_bytes, 8 * MiB);  // live when it began
}

TEST(MemoryPeakTracker, APeakBetweenStepsGoesToTheGapNotToThePhases) {
  Counters c(0, 10 * MiB);
  MemoryPeakTracker t(0);
  c.follow(&t);
  const int epoch = t.open(c.now());

  const int fwd = t.open(c.now());
  c.alloc(20 * MiB);
  c.free(20 * MiB);
  const auto forward = t.close(fwd, c.now());

  const int gap = t.open(c.now());  // the step ended: the loader's pinned batch, a spike
  c.alloc(100 * MiB);
  c.free(100 * MiB);
  const auto data = t.close(gap, c.now());

  const int fwd2 = t.open(c.now());
  c.alloc(20 * MiB);
  c.free(20 * MiB);
  const auto forward2 = t.close(fwd2, c.now());
  const auto whole = t.close(epoch, c.now());

  ASSERT_TRUE(forward && data && forward2 && whole);
  EXPECT_EQ(forward->peak_allocated_bytes, 30 * MiB);
  EXPECT_EQ(data->peak_allocated_bytes, 110 * MiB);
  EXPECT_EQ(forward2->peak_allocated_bytes, 30 * MiB);
  EXPECT_EQ(whole->peak_allocated_bytes, 110 * MiB);
  EXPECT_EQ(whole->peak_allocated_bytes, c.true_peak());
}

TEST(MemoryPeakTracker, NestedIntervalsEachKeepTheirOwnPeak) {
  Counters c;
  MemoryPeakTracker t(0);
  c.follow(&t);
  const int outer = t.open(c.now());
  c.alloc(50 * MiB);
  c.free(50 * MiB);
  const int inner = t.open(c.now());
  c.alloc(5 * MiB);
  c.free(5 * MiB);
  const auto in = t.close(inner, c.now());
  const auto out = t.close(outer, c.now());
  ASSERT_TRUE(in && out);
  EXPECT_EQ(in->peak_allocated_bytes, 5 * MiB);
  EXPECT_EQ(out->peak_allocated_bytes, 50 * MiB);
}

TEST(MemoryPeakTracker, FreesBeforeAnyAllocationKeepTheStartingLevel) {
  Counters c(0, 300 * MiB);  // allocated before fathom followed
  MemoryPeakTracker t(0);
  c.follow(&t);
  const int i = t.open(c.now());
  c.free(100 * MiB);
  c.free(100 * MiB);
  c.alloc(50 * MiB);  // 150
  c.empty_cache();
  const auto p = t.close(i, c.now());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->peak_allocated_bytes, 300 * MiB);
  EXPECT_EQ(p->peak_reserved_bytes, 300 * MiB);
}

TEST(MemoryPeakTracker, DevicesAreTrackedApart) {
  // One allocator process-wide: readings of every device reach every tracker.
  Counters gpu0(0, 0), gpu1(1, 0);
  MemoryPeakTracker t0(0), t1(1);
  gpu0.follow(&t0);
  gpu0.follow(&t1);
  gpu1.follow(&t0);
  gpu1.follow(&t1);
  const int i0 = t0.open(gpu0.now());
  const int i1 = t1.open(gpu1.now());
  EXPECT_EQ(t0.open(gpu1.now()), -1);  // another device's reading opens nothing
  gpu0.alloc(10 * MiB);
  gpu1.alloc(70 * MiB);
  gpu0.alloc(10 * MiB);
  gpu1.free(70 * MiB);
  gpu0.free(20 * MiB);
  const auto p0 = t0.close(i0, gpu0.now());
  const auto p1 = t1.close(i1, gpu1.now());
  ASSERT_TRUE(p0 && p1);
  EXPECT_EQ(p0->peak_allocated_bytes, 20 * MiB);
  EXPECT_EQ(p1->peak_allocated_bytes, 70 * MiB);
}

TEST(MemoryPeakTracker, NoEventsGiveTheLevelAtTheBoundaries) {
  Counters c(0, 42 * MiB);
  MemoryPeakTracker t(0);
  c.follow(&t);
  const int i = t.open(c.now());
  const auto p = t.close(i, c.now());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->peak_allocated_bytes, 42 * MiB);
  EXPECT_EQ(p->peak_reserved_bytes, 42 * MiB);
  EXPECT_EQ(p->alloc_retries, 0);
  EXPECT_EQ(p->ooms, 0);
  EXPECT_FALSE(t.close(i, c.now()));  // closed already
  EXPECT_FALSE(t.close(-1));
  MemoryPeakTracker never_fed(0);
  EXPECT_FALSE(never_fed.close(0));
}

TEST(MemoryPeakTracker, RetriesAndOomsAreCountedPerInterval) {
  Counters c;
  MemoryPeakTracker t(0);
  c.retry();  // before: not this interval's
  const int i = t.open(c.now());
  c.retry();
  c.retry();
  const auto p = t.close(i, c.now());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->alloc_retries, 2);
}

TEST(MemoryPeakTracker, AResetOfTheAccumulatedCountersDoesNotLoseThePeak) {
  // torch.cuda.reset_accumulated_memory_stats() zeroes the totals the tracker steps by.
  Counters c(0, 40 * MiB);
  MemoryPeakTracker t(0);
  c.follow(&t);
  const int i = t.open(c.now());
  c.alloc(30 * MiB);  // 70, seen only by the next reading
  c.reset_accumulated();
  c.free(30 * MiB);
  c.alloc(10 * MiB);  // 50
  c.free(10 * MiB);
  const auto p = t.close(i, c.now());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->peak_allocated_bytes, 70 * MiB);
  EXPECT_EQ(p->alloc_retries, 0);
}

TEST(MemoryPeakTracker, ABoundaryReadingOvertakenByAnotherThreadIsNotABaseline) {
  // The training thread reads the counters, another thread allocates (its reading is applied
  // first), then the training thread opens with its older reading.
  Counters c(0, 0);
  MemoryPeakTracker t(0);
  c.follow(&t);
  const int outer = t.open(c.now());
  const AllocatorReading older = c.now();
  c.alloc(8 * MiB);
  c.alloc(4 * MiB);  // its reading shows the 8 MiB
  const int inner = t.open(older);
  c.free(12 * MiB);
  const auto in = t.close(inner, c.now());
  const auto out = t.close(outer, c.now());
  ASSERT_TRUE(in && out);
  EXPECT_EQ(in->peak_allocated_bytes, 12 * MiB);  // from the newest state, not from zero
  EXPECT_EQ(out->peak_allocated_bytes, 12 * MiB);
}

TEST(MemoryPeakTracker, AtMostKMaxOpenIntervals) {
  Counters c;
  MemoryPeakTracker t(0);
  std::vector<int> ids;
  for (int k = 0; k < MemoryPeakTracker::kMaxOpen; ++k) ids.push_back(t.open(c.now()));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), -1), 0);
  EXPECT_EQ(t.open(c.now()), -1);
  EXPECT_TRUE(t.close(ids[3], c.now()));
  EXPECT_EQ(t.open(c.now()), ids[3]);  // freed slots are reused
}

}  // namespace
}  // namespace fathom
