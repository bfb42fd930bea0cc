#pragma once
// The CPU packages' energy counters (RAPL, through Linux's powercap: <root>/intel-rapl:N/
// energy_uj, the package zones only), read at an epoch's start and end. The counters wrap at
// max_energy_range_uj; reading them usually needs root since 2020 (CVE-2020-8694), so "not
// readable" is a normal answer and the report says which file refused.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fathom {

struct PackageEnergyReading {
  struct Zone {
    std::string path;  // the zone's folder
    std::uint64_t energy_uj = 0;
    std::uint64_t max_range_uj = 0;  // 0 when unknown: no wrap handled
  };
  std::vector<Zone> zones;  // empty: not readable, see why
  std::string why;
};

PackageEnergyReading read_package_energy(const std::string& root = "/sys/class/powercap");

// Joules between two readings of the same zones (wraps handled); nullopt when either is empty or
// the zones differ.
std::optional<double> package_energy_j(const PackageEnergyReading& begin,
                                       const PackageEnergyReading& end) noexcept;

}  // namespace fathom
