// The aggregator's map of correlation and external ids: one array, cleared by a stamp.
#include "aggregate/id_map.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace fathom::aggregation {
namespace {

TEST(IdMap, AssignsFindsOverwritesAndForgetsOnClear) {
  IdMap<int> m;
  EXPECT_EQ(m.find(7), nullptr);
  m.assign(7, 70);
  m.assign(8, 80);
  m.assign(7, 71);  // a repeated id: the last one wins, as a map's operator[] would
  ASSERT_NE(m.find(7), nullptr);
  EXPECT_EQ(*m.find(7), 71);
  EXPECT_EQ(*m.find(8), 80);
  EXPECT_EQ(m.size(), 2u);
  m.clear();
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.find(7), nullptr);
  EXPECT_EQ(m.find(8), nullptr);
  m.assign(8, 81);
  EXPECT_EQ(*m.find(8), 81);
  EXPECT_EQ(m.find(7), nullptr);
}

TEST(IdMap, KeepsEveryIdAcrossGrowthAndGenerations) {
  IdMap<std::uint64_t> m;
  for (std::uint64_t gen = 0; gen < 20; ++gen) {
    const std::uint64_t n = 100 + gen * 500;  // grows in some generations, not in others
    for (std::uint64_t i = 1; i <= n; ++i) m.assign(gen * 1'000'000 + i * 4096, i);
    ASSERT_EQ(m.size(), n);
    for (std::uint64_t i = 1; i <= n; ++i) {
      const std::uint64_t* v = m.find(gen * 1'000'000 + i * 4096);
      ASSERT_NE(v, nullptr) << gen << " " << i;
      EXPECT_EQ(*v, i);
    }
    if (gen > 0) EXPECT_EQ(m.find((gen - 1) * 1'000'000 + 4096), nullptr);  // last generation's
    m.clear();
  }
}

}  // namespace
}  // namespace fathom::aggregation
