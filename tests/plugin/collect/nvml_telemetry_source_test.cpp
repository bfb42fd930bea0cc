// The NVML adapter, end to end through dlopen: against tests/support/fake_nvml.cpp, and against
// the real driver library in nvml_gpu_test.cpp (label gpu).
#include <fathom/device_telemetry.h>
#include <gtest/gtest.h>

#include <thread>

#include "collect/telemetry_sampler.h"
#include "scoped_env.h"

namespace fathom {
namespace {

NvmlDeviceSelector fake(std::string pci_bus_id = "") {
  NvmlDeviceSelector s;
  s.library = FATHOM_FAKE_NVML_PATH;
  s.pci_bus_id = std::move(pci_bus_id);
  return s;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(NvmlTelemetry, MissingLibraryIsUnmeasuredWithTheReason) {
  NvmlDeviceSelector s;
  s.library = "libfathom-no-such-nvml.so.1";
  const NvmlOpenResult r = open_nvml_telemetry(s);
  EXPECT_EQ(r.source, nullptr);
  ASSERT_EQ(r.not_measured.size(), 1u);
  EXPECT_TRUE(has(r.not_measured[0].what, "NVML")) << r.not_measured[0].what;
  EXPECT_TRUE(has(r.not_measured[0].why, "libfathom-no-such-nvml.so.1 could not be loaded"))
      << r.not_measured[0].why;
  EXPECT_TRUE(has(r.not_measured[0].why, "no NVIDIA driver")) << r.not_measured[0].why;
}

TEST(NvmlTelemetry, DriverNotLoadedIsUnmeasured) {
  test::ScopedEnv env("FAKE_NVML_INIT", "driver_not_loaded");
  const NvmlOpenResult r = open_nvml_telemetry(fake());
  EXPECT_EQ(r.source, nullptr);
  ASSERT_EQ(r.not_measured.size(), 1u);
  EXPECT_TRUE(has(r.not_measured[0].why, "Driver Not Loaded")) << r.not_measured[0].why;
  EXPECT_TRUE(has(r.not_measured[0].why, "kernel module")) << r.not_measured[0].why;
}

TEST(NvmlTelemetry, NoDeviceIsUnmeasured) {
  test::ScopedEnv env("FAKE_NVML_DEVICES", "0");
  const NvmlOpenResult r = open_nvml_telemetry(fake());
  EXPECT_EQ(r.source, nullptr);
  ASSERT_EQ(r.not_measured.size(), 1u);
  EXPECT_EQ(r.not_measured[0].why, "NVML sees no GPU");
}

TEST(NvmlTelemetry, ReadsLimitsAndASample) {
  NvmlOpenResult r = open_nvml_telemetry(fake());
  ASSERT_NE(r.source, nullptr);
  EXPECT_TRUE(r.not_measured.empty());
  const DeviceLimits l = r.source->limits();
  EXPECT_EQ(l.name, "Fake H100 80GB HBM3");
  EXPECT_EQ(l.pcie_max_gen, 5);
  EXPECT_EQ(l.pcie_max_width, 16);
  EXPECT_DOUBLE_EQ(*l.sm_clock_max_mhz, 1980);
  EXPECT_DOUBLE_EQ(*l.power_limit_w, 700);
  EXPECT_EQ(l.nvlinks_active, 0);

  const TelemetrySample s = r.source->read(123);
  EXPECT_EQ(s.time_ns, 123);
  EXPECT_TRUE(s.gpu_utilization_pct == 80.0 || s.gpu_utilization_pct == 40.0);
  EXPECT_DOUBLE_EQ(*s.memory_utilization_pct, 25);
  EXPECT_EQ(*s.memory_used_bytes, 10LL << 30);
  EXPECT_EQ(*s.memory_total_bytes, 80LL << 30);
  EXPECT_DOUBLE_EQ(*s.power_w, 350);
  EXPECT_GT(*s.energy_j, 1000);
  EXPECT_DOUBLE_EQ(*s.sm_clock_mhz, 1755);
  EXPECT_DOUBLE_EQ(*s.memory_clock_mhz, 2619);
  EXPECT_TRUE(s.throttle_reasons.has_value());
  EXPECT_EQ(s.pcie_gen, 4);
  EXPECT_EQ(s.pcie_width, 16);
  // The fake does not support PCIe throughput: empty, and said why, once per counter.
  EXPECT_FALSE(s.pcie_tx_bytes_per_s);
  EXPECT_FALSE(s.pcie_rx_bytes_per_s);
  const auto un = r.source->unsupported();
  ASSERT_EQ(un.size(), 2u);
  EXPECT_EQ(un[0].what, "PCIe transmit throughput (NVML)");
  EXPECT_TRUE(has(un[0].why, "Not Supported")) << un[0].why;
  (void)r.source->read(456);
  EXPECT_EQ(r.source->unsupported().size(), 2u);  // not retried, not repeated
}

TEST(NvmlTelemetry, SelectsTheDeviceByPciBusId) {
  EXPECT_NE(open_nvml_telemetry(fake("00000000:3B:00.0")).source, nullptr);
  const NvmlOpenResult r = open_nvml_telemetry(fake("00000000:99:00.0"));
  EXPECT_EQ(r.source, nullptr);
  ASSERT_EQ(r.not_measured.size(), 1u);
  EXPECT_TRUE(has(r.not_measured[0].why, "00000000:99:00.0")) << r.not_measured[0].why;
}

TEST(NvmlTelemetry, SamplerOverTheFakeLibrary) {
  NvmlOpenResult r = open_nvml_telemetry(fake());
  ASSERT_NE(r.source, nullptr);
  TelemetrySampler sampler(std::move(r.source), std::chrono::milliseconds(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const DeviceTelemetry t = sampler.take();
  EXPECT_GE(t.samples, 2);
  EXPECT_EQ(t.device_name, "Fake H100 80GB HBM3");
  // 500 J per reading in the fake's energy counter.
  EXPECT_DOUBLE_EQ(*t.energy_j, 500.0 * (t.samples - 1));
  EXPECT_NEAR(*t.gpu_utilization_pct_mean, 60, 20.0 / t.samples + 1e-9);
  EXPECT_GT(throttle_share(t, "sw_power_cap"), 0.3);
  EXPECT_EQ(t.pcie.gen, 4);
  EXPECT_TRUE(t.pcie.under_load);
  EXPECT_EQ(t.not_measured.size(), 2u);
}

}  // namespace
}  // namespace fathom
