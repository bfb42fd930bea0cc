#pragma once
// Folds the device's management-interface readings (telemetry.h) into a bounded per-epoch
// summary; nothing here knows NVML (see telemetry_sampler.h for the source).
#include <fathom/telemetry.h>
#include <fathom/unmeasured.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

// Peak one-direction PCIe bandwidth of a link in bytes/s: pcie_peak_gb_per_s
// (plugin/src/base/pcie_link.h) scaled. Empty for an unknown generation or width.
std::optional<double> pcie_peak_bytes_per_s(int gen, int width) noexcept;

// The share of samples in which a reason that slows work was active, by reason.
double throttle_share(const DeviceTelemetry& t, std::string_view reason) noexcept;

// Folds samples into a DeviceTelemetry. Memory is bounded by kTelemetrySeriesPoints.
class TelemetryAccumulator {
 public:
  explicit TelemetryAccumulator(DeviceLimits limits, std::string source = "nvml",
                                std::size_t max_points = kTelemetrySeriesPoints);
  void add(const TelemetrySample& s);
  std::int64_t samples() const noexcept { return count_; }
  // The summary of what was added; unsupported lists what the source cannot read.
  DeviceTelemetry summary(const std::vector<Unmeasured>& unsupported) const;

 private:
  struct Mean {
    double sum = 0;
    std::int64_t n = 0;
    void add(const std::optional<double>& v) {
      if (v) sum += *v, ++n;
    }
    std::optional<double> value() const {
      return n ? std::optional<double>(sum / n) : std::nullopt;
    }
  };
  void merge_series();

  DeviceLimits limits_;
  std::string source_;
  std::size_t max_points_;
  std::int64_t count_ = 0;
  std::int64_t first_ns_ = 0, last_ns_ = 0;
  Mean gpu_util_, mem_util_, power_, sm_clock_, mem_clock_, pcie_tx_, pcie_rx_;
  std::optional<double> gpu_util_max_, power_max_, pcie_rx_max_;
  std::optional<std::int64_t> memory_used_max_, memory_total_;
  std::optional<double> energy_first_, energy_last_;
  std::vector<std::int64_t> throttle_counts_;  // per kThrottleReasons entry
  std::int64_t throttle_samples_ = 0;
  std::optional<int> pcie_gen_, pcie_width_;            // fastest seen
  std::optional<int> pcie_gen_busy_, pcie_width_busy_;  // fastest seen while a kernel ran
  // The series: each point is the mean of `stride_` samples; pending_ collects the next one.
  std::vector<TelemetryPoint> series_;
  std::size_t stride_ = 1;
  struct Pending {
    std::size_t n = 0;
    double t_s = 0;
    Mean gpu_util, mem_used, power, sm_clock, tx, rx;
  } pending_;
};

}  // namespace fathom
