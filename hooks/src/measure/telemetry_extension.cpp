#include "measure/telemetry_extension.h"

#include <chrono>
#include <iostream>

#include "base/warning_sink.h"

namespace fathom::detail {

// 100 ms: fine enough for utilization and power over an epoch, and NVML reads cost
// microseconds on the sampler's own thread, never on the training thread.
constexpr std::chrono::milliseconds kPeriod{100};

TelemetryExtension::TelemetryExtension(std::unique_ptr<TelemetrySource> source)
    : sampler_(std::make_unique<TelemetrySampler>(std::move(source), kPeriod)) {}

void TelemetryExtension::on_epoch_begin(std::int64_t) noexcept {
  // Start the epoch's interval here, so time between epochs (evaluation) is not counted.
  try {
    (void)sampler_->take();
  } catch (const std::exception& e) {
    detail::warn("NVML telemetry: ", e.what());
  }
}

void TelemetryExtension::on_epoch_measured(EpochSummary& epoch, Environment&) noexcept {
  try {
    epoch.telemetry = sampler_->take();
  } catch (const std::exception& e) {
    detail::warn("NVML telemetry not taken: ", e.what());
  }
}

std::unique_ptr<TelemetryExtension> make_telemetry_extension(const std::string& pci_bus_id,
                                                             Environment& environment) {
  try {
    NvmlOpenResult nvml = open_nvml_telemetry(NvmlDeviceSelector{pci_bus_id});
    environment.not_measured.insert(environment.not_measured.end(), nvml.not_measured.begin(),
                                    nvml.not_measured.end());
    if (!nvml.source) return nullptr;
    return std::make_unique<TelemetryExtension>(std::move(nvml.source));
  } catch (const std::exception& e) {
    environment.not_measured.push_back(
        {"device telemetry (NVML)", e.what(), UnmeasuredId::DeviceTelemetry});
    return nullptr;
  }
}

}  // namespace fathom::detail
