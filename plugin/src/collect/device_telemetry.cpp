#include <fathom/device_telemetry.h>

#include <algorithm>
#include <array>
#include <iterator>

#include "base/pcie_link.h"

namespace fathom {
namespace {

template <typename T>
void keep_max(std::optional<T>& m, const std::optional<T>& v) {
  if (v && (!m || *v > *m)) m = v;
}

std::optional<double> mean_of(const std::optional<double>& a, const std::optional<double>& b) {
  if (a && b) return (*a + *b) / 2;
  return a ? a : b;
}

}  // namespace

std::optional<double> pcie_peak_bytes_per_s(int gen, int width) noexcept {
  if (auto gb = pcie_peak_gb_per_s(gen, width)) return *gb * 1e9;  // one table: transfer_analysis
  return std::nullopt;
}

double throttle_share(const DeviceTelemetry& t, std::string_view reason) noexcept {
  for (const ThrottleShare& s : t.throttle)
    if (s.reason == reason) return s.share;
  return 0;
}

TelemetryAccumulator::TelemetryAccumulator(DeviceLimits limits, std::string source,
                                           std::size_t max_points)
    : limits_(std::move(limits)),
      source_(std::move(source)),
      max_points_(std::max<std::size_t>(max_points, 2)),
      throttle_counts_(std::size(kThrottleReasons), 0) {
  series_.reserve(max_points_);
}

void TelemetryAccumulator::add(const TelemetrySample& s) {
  if (count_ == 0) first_ns_ = s.time_ns;
  last_ns_ = s.time_ns;
  ++count_;
  gpu_util_.add(s.gpu_utilization_pct);
  mem_util_.add(s.memory_utilization_pct);
  power_.add(s.power_w);
  sm_clock_.add(s.sm_clock_mhz);
  mem_clock_.add(s.memory_clock_mhz);
  pcie_tx_.add(s.pcie_tx_bytes_per_s);
  pcie_rx_.add(s.pcie_rx_bytes_per_s);
  keep_max(gpu_util_max_, s.gpu_utilization_pct);
  keep_max(power_max_, s.power_w);
  keep_max(pcie_rx_max_, s.pcie_rx_bytes_per_s);
  keep_max(memory_used_max_, s.memory_used_bytes);
  if (s.memory_total_bytes) memory_total_ = s.memory_total_bytes;
  if (s.energy_j) {
    if (!energy_first_) energy_first_ = s.energy_j;
    energy_last_ = s.energy_j;
  }
  if (s.throttle_reasons) {
    ++throttle_samples_;
    for (std::size_t i = 0; i < std::size(kThrottleReasons); ++i)
      if (*s.throttle_reasons & kThrottleReasons[i].bit) ++throttle_counts_[i];
  }
  keep_max(pcie_gen_, s.pcie_gen);
  keep_max(pcie_width_, s.pcie_width);
  if (s.gpu_utilization_pct && *s.gpu_utilization_pct > 0) {
    keep_max(pcie_gen_busy_, s.pcie_gen);
    keep_max(pcie_width_busy_, s.pcie_width);
  }

  Pending& p = pending_;
  if (p.n == 0) p.t_s = (s.time_ns - first_ns_) / 1e9;
  ++p.n;
  p.gpu_util.add(s.gpu_utilization_pct);
  p.mem_used.add(s.memory_used_bytes
                     ? std::optional<double>(static_cast<double>(*s.memory_used_bytes))
                     : std::nullopt);
  p.power.add(s.power_w);
  p.sm_clock.add(s.sm_clock_mhz);
  p.tx.add(s.pcie_tx_bytes_per_s);
  p.rx.add(s.pcie_rx_bytes_per_s);
  if (p.n < stride_) return;
  series_.push_back(TelemetryPoint{p.t_s, p.gpu_util.value(), p.mem_used.value(), p.power.value(),
                                   p.sm_clock.value(), p.tx.value(), p.rx.value()});
  pending_ = Pending{};
  if (series_.size() >= max_points_) merge_series();
}

// Halves the series: each pair of neighbours becomes their mean, and later points stand for
// twice as many samples.
void TelemetryAccumulator::merge_series() {
  std::vector<TelemetryPoint> merged;
  merged.reserve(max_points_);
  for (std::size_t i = 0; i + 1 < series_.size(); i += 2) {
    const TelemetryPoint& a = series_[i];
    const TelemetryPoint& b = series_[i + 1];
    merged.push_back(TelemetryPoint{a.t_s, mean_of(a.gpu_utilization_pct, b.gpu_utilization_pct),
                                    mean_of(a.memory_used_bytes, b.memory_used_bytes),
                                    mean_of(a.power_w, b.power_w),
                                    mean_of(a.sm_clock_mhz, b.sm_clock_mhz),
                                    mean_of(a.pcie_tx_bytes_per_s, b.pcie_tx_bytes_per_s),
                                    mean_of(a.pcie_rx_bytes_per_s, b.pcie_rx_bytes_per_s)});
  }
  if (series_.size() % 2) merged.push_back(series_.back());
  series_ = std::move(merged);
  stride_ *= 2;
}

DeviceTelemetry TelemetryAccumulator::summary(const std::vector<Unmeasured>& unsupported) const {
  DeviceTelemetry t;
  t.source = source_;
  t.device_name = limits_.name;
  t.samples = count_;
  t.duration_s = (last_ns_ - first_ns_) / 1e9;
  t.gpu_utilization_pct_mean = gpu_util_.value();
  t.gpu_utilization_pct_max = gpu_util_max_;
  t.memory_utilization_pct_mean = mem_util_.value();
  t.memory_used_bytes_max = memory_used_max_;
  t.memory_total_bytes = memory_total_;
  t.power_w_mean = power_.value();
  t.power_w_max = power_max_;
  t.power_limit_w = limits_.power_limit_w;
  if (energy_first_ && energy_last_ && *energy_last_ >= *energy_first_)
    t.energy_j = *energy_last_ - *energy_first_;
  t.sm_clock_mhz_mean = sm_clock_.value();
  t.sm_clock_mhz_max = limits_.sm_clock_max_mhz;
  t.memory_clock_mhz_mean = mem_clock_.value();
  for (std::size_t i = 0; i < std::size(kThrottleReasons); ++i) {
    if (throttle_counts_[i] == 0) continue;
    t.throttle.push_back({std::string(kThrottleReasons[i].name),
                          static_cast<double>(throttle_counts_[i]) / throttle_samples_});
  }
  std::stable_sort(
      t.throttle.begin(), t.throttle.end(),
      [](const ThrottleShare& a, const ThrottleShare& b) { return a.share > b.share; });
  t.pcie.gen = pcie_gen_busy_ ? pcie_gen_busy_ : pcie_gen_;
  t.pcie.width = pcie_width_busy_ ? pcie_width_busy_ : pcie_width_;
  t.pcie.under_load = pcie_gen_busy_.has_value() || pcie_width_busy_.has_value();
  t.pcie.max_gen = limits_.pcie_max_gen;
  t.pcie.max_width = limits_.pcie_max_width;
  t.pcie_tx_bytes_per_s_mean = pcie_tx_.value();
  t.pcie_rx_bytes_per_s_mean = pcie_rx_.value();
  t.pcie_rx_bytes_per_s_max = pcie_rx_max_;
  t.nvlinks_active = limits_.nvlinks_active;
  t.series = series_;
  if (pending_.n) {
    const Pending& p = pending_;
    t.series.push_back(TelemetryPoint{p.t_s, p.gpu_util.value(), p.mem_used.value(),
                                      p.power.value(), p.sm_clock.value(), p.tx.value(),
                                      p.rx.value()});
  }
  t.not_measured = unsupported;
  return t;
}

}  // namespace fathom
