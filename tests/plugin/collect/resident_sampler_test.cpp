#include "collect/resident_sampler.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "collect/process_memory.h"

namespace fathom {
namespace {

constexpr std::int64_t kMs = 1'000'000;

TEST(ResidentSampler, PhaseEndsWithinTheIntervalReuseTheLastReading) {
  ResidentSampler s;
  const auto first = s.at(100 * kMs);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(s.readings(), 1);
  // 64 MiB touched in between: a phase end 0.5 ms later still reports the first reading.
  constexpr std::size_t kBytes = 64 << 20;
  std::unique_ptr<char[]> block(new char[kBytes]);
  std::memset(block.get(), 1, kBytes);
  EXPECT_EQ(s.at(100 * kMs + ResidentSampler::kIntervalNs / 2), first);
  EXPECT_EQ(s.readings(), 1);
  // One interval after the reading, /proc is read again and sees the growth.
  const auto later = s.at(100 * kMs + ResidentSampler::kIntervalNs);
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(s.readings(), 2);
  EXPECT_GE(*later - *first, static_cast<std::int64_t>(kBytes) * 9 / 10);
  const auto now = current_rss_bytes();
  ASSERT_TRUE(now.has_value());
  EXPECT_NEAR(static_cast<double>(*later), static_cast<double>(*now), 8 << 20);
  // A clock reading from before the last one (another thread's) reuses it too.
  EXPECT_EQ(s.at(99 * kMs), later);
  EXPECT_EQ(s.readings(), 2);
}

}  // namespace
}  // namespace fathom
