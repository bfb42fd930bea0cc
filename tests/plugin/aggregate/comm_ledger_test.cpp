#include "aggregate/comm_ledger.h"

#include <gtest/gtest.h>

#include <thread>

namespace fathom {
namespace {

constexpr std::int64_t kMs = 1'000'000;

TEST(CommLedger, NothingRecordedIsNotMeasured) {
  CommLedger l;
  const CommStats s = l.take();
  EXPECT_EQ(s.source, CommSource::None);
  EXPECT_EQ(s.collectives, 0);
}

TEST(CommLedger, OverlappingBucketsCountOnce) {
  CommLedger l;
  l.add_collective(0, 10 * kMs, 100);
  l.add_collective(5 * kMs, 12 * kMs, 200);   // overlaps the first: busy 0..12
  l.add_collective(20 * kMs, 23 * kMs, 300);  // alone: 3 more
  l.add_wait(4 * kMs);
  l.add_wait(1 * kMs);
  EXPECT_EQ(l.waited_ns(), 5 * kMs);
  const CommStats s = l.take();
  EXPECT_EQ(s.source, CommSource::Host);
  EXPECT_EQ(s.collectives, 3);
  EXPECT_EQ(s.bytes, 600);
  EXPECT_DOUBLE_EQ(s.busy_ms, 15.0);
  EXPECT_DOUBLE_EQ(s.exposed_ms, 5.0);
  const CommStats next = l.take();  // take starts over
  EXPECT_EQ(next.source, CommSource::None);
  EXPECT_DOUBLE_EQ(next.busy_ms, 0.0);
  EXPECT_EQ(l.waited_ns(), 0);
}

TEST(CommLedger, StaysBoundedAndExactForDisjointIntervals) {
  CommLedger l;
  const std::int64_t n = 3 * static_cast<std::int64_t>(CommLedger::kMaxPending) + 7;
  for (std::int64_t i = 0; i < n; ++i) l.add_collective(i * 10 * kMs, i * 10 * kMs + kMs, 1);
  const CommStats s = l.take();
  EXPECT_EQ(s.collectives, n);
  EXPECT_DOUBLE_EQ(s.busy_ms, static_cast<double>(n));
}

TEST(CommLedger, CompletionsFromOtherThreads) {
  CommLedger l;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&l, t] {
      for (int i = 0; i < 1000; ++i)
        l.add_collective((t * 1000 + i) * 2 * kMs, (t * 1000 + i) * 2 * kMs + kMs, 8);
    });
  for (auto& th : threads) th.join();
  const CommStats s = l.take();
  EXPECT_EQ(s.collectives, 4000);
  EXPECT_EQ(s.bytes, 32000);
  EXPECT_DOUBLE_EQ(s.busy_ms, 4000.0);
}

}  // namespace
}  // namespace fathom
