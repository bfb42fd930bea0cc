#include "analyze/mann_whitney.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace fathom::detail {
namespace {

TEST(RankTest, SeparatedSamplesAreSignificantAndOverlappingOnesAreNot) {
  const std::vector<double> low{1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<double> high{11, 12, 13, 14, 15, 16, 17, 18};
  const auto t = rank_test_greater(high, low);
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(t->u, 64);
  // Exact one-sided p is 1/C(16,8) = 7.8e-5; the normal approximation is close.
  EXPECT_LT(t->p, 1e-3);
  EXPECT_GT(rank_test_greater(low, high)->p, 0.99);
  const std::vector<double> mixed{1.5, 3.5, 5.5, 7.5, 2.5, 4.5, 6.5, 8.5};
  EXPECT_GT(rank_test_greater(mixed, low)->p, 0.2);
}

TEST(RankTest, OneHugeOutlierMovesTheStatisticByOneRankAtMost) {
  std::vector<double> a{1.1, 2.1, 3.1, 4.1, 5.1, 6.1, 7.1, 8.1};
  const std::vector<double> b{1, 2, 3, 4, 5, 6, 7, 8};
  const double before = rank_test_greater(a, b)->p;
  a[0] = 1e9;
  const auto after = rank_test_greater(a, b);
  EXPECT_GT(after->p, 0.05) << before;
}

TEST(RankTest, TooFewOrNonFiniteValuesAreNotTested) {
  EXPECT_FALSE(rank_test_greater({1, 2}, {1, 2, 3}));
  EXPECT_FALSE(rank_test_greater({1, 2, NAN}, {1, 2, 3}));
  const auto ties = rank_test_greater({2, 2, 2}, {2, 2, 2});
  ASSERT_TRUE(ties);
  EXPECT_EQ(ties->p, 1);
}

}  // namespace
}  // namespace fathom::detail
