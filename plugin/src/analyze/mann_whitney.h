#pragma once
// A one-sided Mann-Whitney (Wilcoxon rank-sum) test: do the values of `a` tend to be greater than
// those of `b`? Used by Auto mixed precision to decide keep or roll back over a whole watch window
// (losses against the fp32 trend, step times against fp32 steps). It looks only at ranks, so one
// outlier, however large, moves the statistic by at most one rank against each value of the other
// sample: a single noisy batch or a single slow step cannot decide the outcome.
//
// The p-value comes from the normal approximation with the tie correction and a continuity
// correction, fine from about 5 values a side (the watch has more); with fewer it says nothing.
#include <cstddef>
#include <optional>
#include <vector>

namespace fathom::detail {

struct RankTest {
  std::size_t n_a = 0;
  std::size_t n_b = 0;
  double u = 0;  // pairs (x in a, y in b) with x > y, ties counted half
  double p = 1;  // one-sided: the chance of a U this large when a and b come from one distribution
};

// nullopt when either side has fewer than min_each values or a value is not finite.
std::optional<RankTest> rank_test_greater(const std::vector<double>& a,
                                          const std::vector<double>& b, std::size_t min_each = 3);

}  // namespace fathom::detail
