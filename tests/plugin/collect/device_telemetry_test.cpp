#include <fathom/device_telemetry.h>
#include <gtest/gtest.h>

namespace fathom {
namespace {

TelemetrySample sample(std::int64_t t_ms, double util) {
  TelemetrySample s;
  s.time_ns = t_ms * 1'000'000;
  s.gpu_utilization_pct = util;
  s.power_w = util * 2;
  return s;
}

TEST(DeviceTelemetry, PciePeakPerGenerationAndWidth) {
  EXPECT_NEAR(*pcie_peak_bytes_per_s(3, 16), 15.754e9, 1e6);
  EXPECT_NEAR(*pcie_peak_bytes_per_s(4, 16), 31.507e9, 1e6);
  EXPECT_NEAR(*pcie_peak_bytes_per_s(5, 16), 63.016e9, 1e6);
  EXPECT_NEAR(*pcie_peak_bytes_per_s(1, 1), 250e6, 1);
  EXPECT_FALSE(pcie_peak_bytes_per_s(0, 16));
  EXPECT_FALSE(pcie_peak_bytes_per_s(9, 16));
  EXPECT_FALSE(pcie_peak_bytes_per_s(4, 0));
}

TEST(DeviceTelemetry, MeansMaximaAndEnergyDifference) {
  DeviceLimits limits;
  limits.name = "gpu";
  limits.pcie_max_gen = 5;
  limits.pcie_max_width = 16;
  limits.sm_clock_max_mhz = 1980;
  limits.power_limit_w = 700;
  TelemetryAccumulator acc(limits);
  for (int i = 0; i < 4; ++i) {
    TelemetrySample s = sample(100 * i, i % 2 ? 100 : 0);  // 0, 100, 0, 100
    s.energy_j = 1000 + 50 * i;
    s.memory_used_bytes = 1000 + i;
    s.memory_total_bytes = 5000;
    s.throttle_reasons = i % 2 ? 0x4 : 0x1;  // power cap when busy, idle otherwise
    s.pcie_gen = i % 2 ? 4 : 1;              // the link drops at idle
    s.pcie_width = 16;
    acc.add(s);
  }
  const DeviceTelemetry t = acc.summary({{"x", "y"}});
  EXPECT_EQ(t.samples, 4);
  EXPECT_DOUBLE_EQ(t.duration_s, 0.3);
  EXPECT_DOUBLE_EQ(*t.gpu_utilization_pct_mean, 50);
  EXPECT_DOUBLE_EQ(*t.gpu_utilization_pct_max, 100);
  EXPECT_DOUBLE_EQ(*t.power_w_mean, 100);
  EXPECT_DOUBLE_EQ(*t.power_w_max, 200);
  EXPECT_DOUBLE_EQ(*t.energy_j, 150);
  EXPECT_EQ(*t.memory_used_bytes_max, 1003);
  EXPECT_EQ(*t.memory_total_bytes, 5000);
  EXPECT_DOUBLE_EQ(throttle_share(t, "sw_power_cap"), 0.5);
  EXPECT_DOUBLE_EQ(throttle_share(t, "gpu_idle"), 0.5);
  EXPECT_DOUBLE_EQ(throttle_share(t, "hw_slowdown"), 0);
  EXPECT_EQ(*t.pcie.gen, 4);
  EXPECT_TRUE(t.pcie.under_load);
  EXPECT_EQ(*t.pcie.max_gen, 5);
  EXPECT_DOUBLE_EQ(*t.sm_clock_mhz_max, 1980);
  EXPECT_FALSE(t.sm_clock_mhz_mean.has_value());  // never read: empty, not zero
  EXPECT_FALSE(t.pcie_rx_bytes_per_s_mean.has_value());
  ASSERT_EQ(t.not_measured.size(), 1u);
  EXPECT_EQ(t.series.size(), 4u);
}

TEST(DeviceTelemetry, LinkSeenOnlyAtIdleIsMarkedSo) {
  TelemetryAccumulator acc(DeviceLimits{});
  TelemetrySample s = sample(0, 0);
  s.pcie_gen = 1;
  s.pcie_width = 16;
  acc.add(s);
  const DeviceTelemetry t = acc.summary({});
  EXPECT_EQ(*t.pcie.gen, 1);
  EXPECT_FALSE(t.pcie.under_load);
}

TEST(DeviceTelemetry, SeriesStaysBoundedAndKeepsTheMean) {
  TelemetryAccumulator acc(DeviceLimits{}, "nvml", /*max_points=*/16);
  for (int i = 0; i < 1000; ++i) acc.add(sample(i, i % 2 ? 100 : 0));
  const DeviceTelemetry t = acc.summary({});
  EXPECT_EQ(t.samples, 1000);
  EXPECT_LE(t.series.size(), 16u);
  EXPECT_GE(t.series.size(), 8u);
  // Every merged point averages an even run of 0/100 samples.
  for (const TelemetryPoint& p : t.series) EXPECT_NEAR(*p.gpu_utilization_pct, 50, 1e-9);
  // Points stay in time order and span the epoch.
  for (std::size_t i = 1; i < t.series.size(); ++i) EXPECT_GT(t.series[i].t_s, t.series[i - 1].t_s);
  EXPECT_DOUBLE_EQ(t.series.front().t_s, 0);
  EXPECT_GT(t.series.back().t_s, 0.9);
}

TEST(DeviceTelemetry, NoSamplesGivesEmptyFields) {
  const DeviceTelemetry t = TelemetryAccumulator(DeviceLimits{}).summary({});
  EXPECT_EQ(t.samples, 0);
  EXPECT_FALSE(t.gpu_utilization_pct_mean);
  EXPECT_FALSE(t.energy_j);
  EXPECT_TRUE(t.series.empty());
}

}  // namespace
}  // namespace fathom
