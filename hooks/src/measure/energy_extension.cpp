#include "measure/energy_extension.h"

#include "analyze/achievement_derived.h"
#include "base/warning_sink.h"

namespace fathom::detail {

EnergyExtension::EnergyExtension(std::string powercap_root) : root_(std::move(powercap_root)) {}

void EnergyExtension::on_epoch_begin(std::int64_t) noexcept {
  try {
    begin_ = read_package_energy(root_);
  } catch (...) {
    begin_ = {};
    begin_.why = "reading the RAPL counters failed";
  }
}

void EnergyExtension::on_epoch_measured(EpochSummary& epoch, Environment&) noexcept {
  try {
    const PackageEnergyReading end = read_package_energy(root_);
    const std::optional<double> j = package_energy_j(begin_, end);
    std::string why = !begin_.why.empty() ? begin_.why : end.why;
    if (!j && why.empty()) why = "the package zones changed during the epoch";
    epoch.energy = summarize_energy(epoch, j, why);
  } catch (...) {
    swallowed("energy");
  }
}

}  // namespace fathom::detail
