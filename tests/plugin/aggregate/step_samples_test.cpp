#include "aggregate/step_samples.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

TEST(StepSamples, MedianIgnoresAWarmUpStep) {
  StepSamples s;
  EXPECT_FALSE(s.median());
  s.add(500.0);  // the first step: allocations, connections
  for (int i = 0; i < 10; ++i) s.add(10.0 + i * 0.1);
  EXPECT_NEAR(*s.median(), 10.5, 1e-9);  // 11 samples: the 6th smallest
}

TEST(StepSamples, EvenCountAveragesTheMiddlePair) {
  StepSamples s;
  for (double v : {4.0, 1.0, 3.0, 2.0}) s.add(v);
  EXPECT_DOUBLE_EQ(*s.median(), 2.5);
}

TEST(StepSamples, StaysBoundedAndSpreadOverTheEpoch) {
  StepSamples s;
  const int n = 5 * static_cast<int>(StepSamples::kCapacity) + 3;
  for (int i = 0; i < n; ++i) s.add(static_cast<double>(i));
  EXPECT_LE(s.size(), StepSamples::kCapacity);
  EXPECT_GE(s.size(), StepSamples::kCapacity / 2);
  EXPECT_NEAR(*s.median(), n / 2.0, n * 0.01);  // an even spread keeps the median in the middle
  s.clear();
  EXPECT_EQ(s.size(), 0u);
  s.add(7.0);
  EXPECT_DOUBLE_EQ(*s.median(), 7.0);
}

}  // namespace
}  // namespace fathom
