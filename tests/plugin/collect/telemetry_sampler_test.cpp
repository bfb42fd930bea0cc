#include "collect/telemetry_sampler.h"

#include <fathom/error.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace fathom {
namespace {

// Counts readings; each reports its own ordinal as utilization.
class CountingSource final : public TelemetrySource {
 public:
  explicit CountingSource(std::atomic<int>* reads) : reads_(reads) {}
  DeviceLimits limits() const override {
    DeviceLimits l;
    l.name = "counting";
    return l;
  }
  TelemetrySample read(std::int64_t now_ns) noexcept override {
    TelemetrySample s;
    s.time_ns = now_ns;
    s.gpu_utilization_pct = ++*reads_;
    s.energy_j = 10.0 * *reads_;
    return s;
  }
  std::vector<Unmeasured> unsupported() const override {
    return {{"PCIe throughput", "not supported"}};
  }

 private:
  std::atomic<int>* reads_;
};

TEST(TelemetrySampler, SamplesInTheBackgroundAndSplitsIntervals) {
  std::atomic<int> reads{0};
  TelemetrySampler sampler(std::make_unique<CountingSource>(&reads), std::chrono::milliseconds(1));
  while (reads < 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const DeviceTelemetry first = sampler.take();
  EXPECT_GE(first.samples, 20);
  EXPECT_EQ(first.device_name, "counting");
  EXPECT_EQ(first.source, "nvml");
  ASSERT_EQ(first.not_measured.size(), 1u);
  EXPECT_EQ(first.not_measured[0].why, "not supported");
  // The second interval starts after the first: its readings have higher ordinals.
  const DeviceTelemetry second = sampler.take();
  EXPECT_GE(second.samples, 1);
  EXPECT_GT(*second.gpu_utilization_pct_mean, *first.gpu_utilization_pct_max);
  EXPECT_GE(sampler.samples_taken(), first.samples + second.samples);
}

TEST(TelemetrySampler, TakeRightAwayHasOneSample) {
  std::atomic<int> reads{0};
  TelemetrySampler sampler(std::make_unique<CountingSource>(&reads), std::chrono::hours(1));
  const DeviceTelemetry t = sampler.take();
  EXPECT_GE(t.samples, 1);  // the thread's first reading and take()'s own
  EXPECT_LE(t.samples, 2);
}

TEST(TelemetrySampler, StopsPromptlyOnDestruction) {
  std::atomic<int> reads{0};
  const auto start = std::chrono::steady_clock::now();
  { TelemetrySampler sampler(std::make_unique<CountingSource>(&reads), std::chrono::hours(1)); }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(TelemetrySampler, RejectsNoSourceAndZeroPeriod) {
  std::atomic<int> reads{0};
  EXPECT_THROW(TelemetrySampler(nullptr, std::chrono::milliseconds(100)), Error);
  EXPECT_THROW(
      TelemetrySampler(std::make_unique<CountingSource>(&reads), std::chrono::milliseconds(0)),
      Error);
}

}  // namespace
}  // namespace fathom
