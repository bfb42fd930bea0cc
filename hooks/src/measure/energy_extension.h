#pragma once
// The energy an epoch cost: the CPU packages' RAPL counters read at the epoch's start and end,
// and, on a GPU, NVML's counter as the telemetry extension (added before this one) measured it.
// Fills EpochSummary::energy; unreadable counters are "not measured" with the file that refused.
#include <string>

#include "collect/package_energy.h"
#include "framework/session_extension.h"

namespace fathom::detail {

class EnergyExtension : public SessionExtension {
 public:
  explicit EnergyExtension(std::string powercap_root = "/sys/class/powercap");
  void on_epoch_begin(std::int64_t epoch) noexcept override;
  void on_epoch_measured(EpochSummary& epoch, Environment& environment) noexcept override;

 private:
  std::string root_;
  PackageEnergyReading begin_;
};

}  // namespace fathom::detail
