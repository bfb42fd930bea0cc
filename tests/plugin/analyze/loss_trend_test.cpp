#include <fathom/loss_trend.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace fathom {
namespace {

// A falling loss with a known alternating noise of +-0.05.
std::vector<LossPoint> falling(int n, double noise = 0.05) {
  std::vector<LossPoint> v;
  for (int i = 0; i < n; ++i) v.push_back({i, 2.0 - 0.01 * i + (i % 2 ? noise : -noise)});
  return v;
}

TEST(LossTrend, FitsSlopeLevelAndNoise) {
  auto t = LossTrend::fit(falling(20));
  ASSERT_TRUE(t);
  EXPECT_NEAR(t->slope(), -0.01, 1e-3);
  // The line ends near 1.81; the last five losses average 1.84, and the level takes the higher.
  EXPECT_NEAR(t->level(), 1.84, 1e-9);
  EXPECT_EQ(t->last_step(), 19);
  EXPECT_NEAR(t->noise(), 0.05, 0.01);
}

TEST(LossTrend, NeedsThreeFinitePoints) {
  EXPECT_FALSE(LossTrend::fit({{0, 1.0}, {1, 0.9}}));
  auto v = falling(10);
  v[4].loss = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(LossTrend::fit(v));
}

TEST(LossTrend, AConvexCurveSetsTheLevelAtItsRecentLossesNotUnderThem) {
  // Fast early fall, then flat near 0.3: a line through it ends far below 0.3.
  std::vector<LossPoint> v;
  for (int i = 0; i < 20; ++i) v.push_back({i, 0.3 + 2.0 * std::exp(-0.5 * i)});
  auto t = LossTrend::fit(v);
  ASSERT_TRUE(t);
  EXPECT_GT(t->level(), 0.3);
  EXPECT_TRUE(t->check({0.31, 0.32, 0.30}, 21, 0.10).within);
}

TEST(LossTrend, FallingTrendIsNotExtrapolatedDownward) {
  auto t = LossTrend::fit(falling(20));
  ASSERT_TRUE(t);
  // 100 steps later the line would be at 0.81; the reference stays at the level reached.
  EXPECT_DOUBLE_EQ(t->reference(119), t->level());
}

TEST(LossTrend, RisingTrendIsFollowed) {
  std::vector<LossPoint> v;
  for (int i = 0; i < 10; ++i) v.push_back({i, 1.0 + 0.1 * i});
  auto t = LossTrend::fit(v);
  ASSERT_TRUE(t);
  EXPECT_NEAR(t->reference(19), 1.9 + 1.0, 1e-9);
}

TEST(LossTrend, LossesNearTheTrendAreWithin) {
  auto t = LossTrend::fit(falling(20));
  const TrendCheck c = t->check({1.85, 1.75, 1.80}, 22, 0.10);
  EXPECT_TRUE(c.within);
  EXPECT_NEAR(c.recent_mean, 1.8, 1e-12);
  // limit = level * 1.1 + 3 * noise / sqrt(3)
  EXPECT_NEAR(c.limit, t->level() * 1.1 + 3 * t->noise() / std::sqrt(3.0), 1e-12);
}

TEST(LossTrend, DriftAboveToleranceAndNoiseIsCaught) {
  auto t = LossTrend::fit(falling(20));
  EXPECT_FALSE(t->check({2.3, 2.4, 2.5, 2.6, 2.7}, 24, 0.10).within);
  // Lower losses than the trend are never a drift.
  EXPECT_TRUE(t->check({0.5, 0.4}, 24, 0.0).within);
}

TEST(LossTrend, NonFiniteRecentLossIsOutside) {
  auto t = LossTrend::fit(falling(20));
  EXPECT_FALSE(t->check({1.8, std::numeric_limits<double>::infinity()}, 21, 0.10).within);
}

TEST(Median, OddEvenAndEmpty) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

}  // namespace
}  // namespace fathom
