// CUPTI time onto fathom's clock: the unit measured, never assumed (finding 6 of issue 12).
#include <gtest/gtest.h>

#include "collect/cupti/clock_alignment.h"

namespace fathom::cupti {
namespace {

TEST(ClockAlignment, NanosecondsAreShiftedNotStretched) {
  ClockAlignment c;
  // CLOCK_REALTIME is ahead of the steady clock by a fixed offset; readings jitter a little.
  c.reset({1'000'000, 9'001'000'030}, {1'300'000, 9'001'300'000});
  ASSERT_TRUE(c.ready());
  EXPECT_TRUE(c.nanoseconds());
  EXPECT_DOUBLE_EQ(c.ticks_per_ns(), 1.0);
  EXPECT_EQ(c.to_host(9'001'300'000 + 5'000), 1'300'000 + 5'000);
  EXPECT_EQ(c.to_host(0), 0) << "CUPTI's 0 is 'not measured', not a time";
}

TEST(ClockAlignment, TicksOfAnotherUnitAreConverted) {
  ClockAlignment c;
  // A TSC at 2.5 ticks per ns from an arbitrary origin (Kineto's timestamp callback).
  auto tsc = [](std::int64_t ns) { return static_cast<std::uint64_t>(ns) * 5 / 2 + 777'000; };
  c.reset({1'000'000, tsc(1'000'000)}, {1'400'000, tsc(1'400'000)});
  ASSERT_TRUE(c.ready());
  EXPECT_FALSE(c.nanoseconds());
  EXPECT_NEAR(c.ticks_per_ns(), 2.5, 1e-9);
  EXPECT_NEAR(static_cast<double>(c.to_host(tsc(3'000'000))), 3e6, 2.0);
  // Later samples refine the rate over a longer baseline.
  EXPECT_TRUE(c.add({50'000'000, tsc(50'000'000)}));
  EXPECT_NEAR(static_cast<double>(c.to_host(tsc(60'000'000))), 6e7, 2.0);
}

TEST(ClockAlignment, ASourceThatChangesUnderneathIsSeen) {
  ClockAlignment c;
  c.reset({1'000'000, 2'001'000'000}, {1'300'000, 2'001'300'000});
  EXPECT_TRUE(c.add({10'000'000, 2'010'000'100}));
  // A timestamp callback registered mid-run: CUPTI's time is now something else entirely.
  EXPECT_FALSE(c.add({20'000'000, 50'000'000'000}));
}

TEST(ClockAlignment, RealtimeNanosecondsKeepEveryNanosecond) {
  ClockAlignment c;
  const std::uint64_t epoch = 1'764'000'000'000'000'000ull;  // CLOCK_REALTIME in December 2025
  c.reset({1'000'000, epoch + 1'000'000}, {1'300'000, epoch + 1'300'000});
  ASSERT_TRUE(c.nanoseconds());
  EXPECT_EQ(c.to_host(epoch + 2'500'001) - c.to_host(epoch + 2'000'000), 500'001)
      << "a double would have rounded these to 256 ns";
}

TEST(ClockAlignment, SamplesTooCloseGiveNoFit) {
  ClockAlignment c;
  c.reset({1'000'000, 5}, {1'000'010, 30});
  EXPECT_FALSE(c.ready());
  EXPECT_FALSE(c.add({2'000'000, 100}));
}

}  // namespace
}  // namespace fathom::cupti
