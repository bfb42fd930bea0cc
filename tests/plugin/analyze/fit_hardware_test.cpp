#include "analyze/fit_hardware.h"

#include <fathom/hardware_fit.h>
#include <gtest/gtest.h>

#include "base/thresholds.h"

namespace fathom {
namespace {

constexpr std::int64_t GiB = 1LL << 30;

MemoryFootprint fp32_run() {
  MemoryFootprint m;
  m.parameter_bytes = 4 * GiB;
  m.gradient_bytes = 4 * GiB;
  m.optimizer_state_bytes = 8 * GiB;
  m.activation_bytes = 32 * GiB;
  m.checkpointable_blocks = 64;  // checkpointing keeps 2/sqrt(64) = 1/4 of the activations
  return m;
}

const FitVariant& variant(const HardwareFit& f, bool mp, bool ck) {
  for (const FitVariant& v : f.variants)
    if (v.mixed_precision == mp && v.checkpointing == ck) return v;
  throw std::runtime_error("no such variant");
}

TEST(HardwareFit, FourVariantsAsRunFirst) {
  const HardwareFit f = hardware_fit(fp32_run(), std::nullopt, std::nullopt);
  ASSERT_EQ(f.variants.size(), 4u);
  EXPECT_TRUE(f.variants[0].as_run);
  EXPECT_FALSE(f.variants[0].mixed_precision);
  EXPECT_FALSE(f.variants[0].checkpointing);
  for (std::size_t i = 1; i < 4; ++i) EXPECT_FALSE(f.variants[i].as_run);
}

// Before: activation bytes were 0 when no chain was measured, so the variants ranked by their
// cast caches alone and mixed precision "needed more" than fp32.
TEST(HardwareFit, NoVariantIsEstimatedWithoutMeasuredActivations) {
  MemoryFootprint m = fp32_run();
  m.activation_bytes.reset();
  m.activation_why = "no model ran through fathom::forward";
  const HardwareFit f = hardware_fit(m, std::nullopt, std::nullopt);
  ASSERT_EQ(f.variants.size(), 4u);
  for (const FitVariant& v : f.variants) {
    EXPECT_FALSE(v.need_bytes.has_value());
    EXPECT_TRUE(v.cards.empty());
    EXPECT_EQ(v.why, "activation bytes not measured: no model ran through fathom::forward");
  }
}

TEST(HardwareFit, NeedsFromMeasuredBytesWithAssumedOverhead) {
  const HardwareFit f = hardware_fit(fp32_run(), std::nullopt, std::nullopt);
  EXPECT_FALSE(f.overhead_measured);
  EXPECT_EQ(f.overhead_bytes, thresholds::kAssumedRuntimeOverheadBytes);
  EXPECT_DOUBLE_EQ(f.fragmentation, 1.0);
  const std::int64_t o = f.overhead_bytes;
  EXPECT_EQ(*variant(f, false, false).need_bytes, 48 * GiB + o);  // 16 fixed + 32 activations
  // Mixed precision: 16 activations + 2 weight copies.
  EXPECT_EQ(*variant(f, true, false).need_bytes, 34 * GiB + o);
  EXPECT_EQ(variant(f, true, false).cast_cache_bytes, 2 * GiB);
  // Checkpointing: 8 activations.
  EXPECT_EQ(*variant(f, false, true).need_bytes, 24 * GiB + o);
  // Both: 4 activations + 2 weight copies.
  EXPECT_EQ(*variant(f, true, true).need_bytes, 22 * GiB + o);
}

TEST(HardwareFit, CardsFitTightOrNot) {
  const HardwareFit f = hardware_fit(fp32_run(), std::nullopt, std::nullopt);
  // 48.75 GiB: not on 24 or 40, fits 80 and 141.
  const auto& as_run = variant(f, false, false).cards;
  ASSERT_EQ(as_run.size(), 4u);
  EXPECT_EQ(as_run[0], Fit::DoesNotFit);
  EXPECT_EQ(as_run[1], Fit::DoesNotFit);
  EXPECT_EQ(as_run[2], Fit::Fits);
  EXPECT_EQ(as_run[3], Fit::Fits);
  // 22.75 GiB on 24 GiB is above 90 %: tight.
  EXPECT_EQ(variant(f, true, true).cards[0], Fit::Tight);
  EXPECT_EQ(fit_on(90, 100), Fit::Fits);
  EXPECT_EQ(fit_on(91, 100), Fit::Tight);
  EXPECT_EQ(fit_on(101, 100), Fit::DoesNotFit);
  EXPECT_EQ(fit_name(Fit::DoesNotFit), "does_not_fit");
}

TEST(HardwareFit, MeasuredOverheadAndFragmentation) {
  DeviceMemoryPeak peak{40 * GiB, 50 * GiB, 0, 0};
  const HardwareFit f = hardware_fit(fp32_run(), peak, 51 * GiB);
  EXPECT_TRUE(f.overhead_measured);
  EXPECT_EQ(f.overhead_bytes, 1 * GiB);
  EXPECT_DOUBLE_EQ(f.fragmentation, 1.25);
  EXPECT_EQ(*variant(f, false, false).need_bytes, 61 * GiB);  // 48 x 1.25 + 1
}

TEST(HardwareFit, MixedPrecisionRunEstimatesFp32FromIt) {
  MemoryFootprint m = fp32_run();
  m.mixed_precision = true;
  m.activation_bytes = 16 * GiB;
  const HardwareFit f = hardware_fit(m, std::nullopt, std::nullopt);
  EXPECT_TRUE(variant(f, true, false).as_run);
  EXPECT_EQ(variant(f, false, false).activation_bytes, 32 * GiB);
}

TEST(HardwareFit, WhatCannotBeEstimatedSaysWhy) {
  MemoryFootprint m = fp32_run();
  m.checkpointable_blocks.reset();
  HardwareFit f = hardware_fit(m, std::nullopt, std::nullopt);
  EXPECT_FALSE(variant(f, false, true).need_bytes);
  EXPECT_NE(variant(f, false, true).why.find("checkpointable blocks"), std::string::npos);
  EXPECT_TRUE(variant(f, true, false).need_bytes);

  m = fp32_run();
  m.checkpointing = true;
  f = hardware_fit(m, std::nullopt, std::nullopt);
  EXPECT_FALSE(variant(f, false, false).need_bytes);
  EXPECT_NE(variant(f, false, false).why.find("the run checkpointed"), std::string::npos);
}

}  // namespace
}  // namespace fathom
