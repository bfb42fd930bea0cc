#pragma once
// What the device's management interface (NVML) says while a run trains: utilization, memory,
// power and energy, clocks and why they were lowered, and the PCIe link; one reading, and the
// bounded per-epoch summary the report carries. device_telemetry.h folds readings into it.
#include <fathom/unmeasured.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

// One reading. A field the device or driver cannot report stays empty.
struct TelemetrySample {
  std::int64_t time_ns = 0;                      // steady clock (fathom/clock.h)
  std::optional<double> gpu_utilization_pct;     // share of the last period a kernel ran
  std::optional<double> memory_utilization_pct;  // share of the last period memory was busy
  std::optional<std::int64_t> memory_used_bytes;
  std::optional<std::int64_t> memory_total_bytes;
  std::optional<double> power_w;
  std::optional<double> energy_j;  // the device's energy counter (since the driver loaded)
  std::optional<double> sm_clock_mhz;
  std::optional<double> memory_clock_mhz;
  std::optional<std::uint64_t> throttle_reasons;  // NVML clocks-event reason bits
  std::optional<int> pcie_gen;                    // link generation right now
  std::optional<int> pcie_width;                  // lanes right now
  std::optional<double> pcie_tx_bytes_per_s;      // device -> host
  std::optional<double> pcie_rx_bytes_per_s;      // host -> device
};

// What a device can do at most; read once when the source opens.
struct DeviceLimits {
  std::string name;
  std::optional<int> pcie_max_gen;
  std::optional<int> pcie_max_width;
  std::optional<double> sm_clock_max_mhz;
  std::optional<double> power_limit_w;
  std::optional<int> nvlinks_active;  // NVLink links up (0: the device talks over PCIe only)
};

// The NVML clocks-event ("throttle") reasons, bit by bit.
struct ThrottleReason {
  std::uint64_t bit;
  std::string_view name;
  bool slows_work;  // false for reasons that are not a slowdown (idle, app clocks, display)
};
inline constexpr ThrottleReason kThrottleReasons[] = {
    {0x1, "gpu_idle", false},
    {0x2, "applications_clocks", false},
    {0x4, "sw_power_cap", true},
    {0x8, "hw_slowdown", true},
    {0x10, "sync_boost", false},
    {0x20, "sw_thermal_slowdown", true},
    {0x40, "hw_thermal_slowdown", true},
    {0x80, "hw_power_brake_slowdown", true},
    {0x100, "display_clock_setting", false},
};

struct ThrottleShare {
  std::string reason;  // a kThrottleReasons name
  double share = 0;    // of the samples, 0..1
};

// The PCIe link as observed: the fastest state seen during the epoch (GPUs lower the link when
// idle, so one reading at rest says little) and what the link could do.
struct PcieLinkState {
  std::optional<int> gen;
  std::optional<int> width;
  std::optional<int> max_gen;
  std::optional<int> max_width;
  bool under_load = false;  // gen and width come from samples in which a kernel ran
};

// One point of the charted series: the mean of the samples it stands for.
struct TelemetryPoint {
  double t_s = 0;  // since the epoch's first sample
  std::optional<double> gpu_utilization_pct;
  std::optional<double> memory_used_bytes;
  std::optional<double> power_w;
  std::optional<double> sm_clock_mhz;
  std::optional<double> pcie_tx_bytes_per_s;
  std::optional<double> pcie_rx_bytes_per_s;
};

// At most this many points per epoch: when full, neighbours are merged (memory stays bounded
// however long the epoch runs).
inline constexpr std::size_t kTelemetrySeriesPoints = 256;

// An epoch's telemetry. Means are over the samples that had the field.
struct DeviceTelemetry {
  std::string source;  // "nvml"
  std::string device_name;
  std::int64_t samples = 0;
  double duration_s = 0;  // first to last sample
  std::optional<double> gpu_utilization_pct_mean;
  std::optional<double> gpu_utilization_pct_max;
  std::optional<double> memory_utilization_pct_mean;
  std::optional<std::int64_t> memory_used_bytes_max;
  std::optional<std::int64_t> memory_total_bytes;
  std::optional<double> power_w_mean;
  std::optional<double> power_w_max;
  std::optional<double> power_limit_w;
  std::optional<double> energy_j;  // counter difference, first to last sample
  std::optional<double> sm_clock_mhz_mean;
  std::optional<double> sm_clock_mhz_max;  // the device's maximum, not the highest seen
  std::optional<double> memory_clock_mhz_mean;
  std::vector<ThrottleShare> throttle;  // reasons seen, largest share first
  PcieLinkState pcie;
  std::optional<double> pcie_tx_bytes_per_s_mean;
  std::optional<double> pcie_rx_bytes_per_s_mean;
  std::optional<double> pcie_rx_bytes_per_s_max;
  std::optional<int> nvlinks_active;
  std::vector<TelemetryPoint> series;
  std::vector<Unmeasured> not_measured;  // fields the device or driver did not report
};

}  // namespace fathom
