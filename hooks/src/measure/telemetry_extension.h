#pragma once
// NVML telemetry for a session: a background sampler on the measured GPU, taken at each epoch
// end into EpochSummary::telemetry. NVML absent, or no GPU: the report says so and nothing runs.
#include <memory>
#include <optional>
#include <string>

#include "collect/telemetry_sampler.h"
#include "framework/session_extension.h"

namespace fathom::detail {

class TelemetryExtension : public SessionExtension {
 public:
  explicit TelemetryExtension(std::unique_ptr<TelemetrySource> source);
  void on_epoch_begin(std::int64_t epoch) noexcept override;
  void on_epoch_measured(EpochSummary& epoch, Environment& environment) noexcept override;

 private:
  std::unique_ptr<TelemetrySampler> sampler_;
};

// The extension for pci_bus_id, or null (with the reason added to environment) when NVML
// cannot be opened.
std::unique_ptr<TelemetryExtension> make_telemetry_extension(const std::string& pci_bus_id,
                                                             Environment& environment);

}  // namespace fathom::detail
