#include "collect/package_energy.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fathom {
namespace {

std::optional<std::string> read_line(const std::filesystem::path& p, std::string& why) {
  std::ifstream in(p);
  std::string s;
  if (!in || !std::getline(in, s)) {
    why = p.string() + " is not readable (" + std::strerror(errno ? errno : EACCES) +
          "; RAPL counters usually need root)";
    return std::nullopt;
  }
  return s;
}

}  // namespace

PackageEnergyReading read_package_energy(const std::string& root) {
  PackageEnergyReading r;
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) {
    r.why = root + " does not exist (no powercap driver: a VM, or not an Intel / AMD RAPL CPU)";
    return r;
  }
  std::vector<std::filesystem::path> zones;
  for (const auto& d : std::filesystem::directory_iterator(root, ec)) {
    const std::string n = d.path().filename().string();
    // Top-level zones only ("intel-rapl:0", not its subzones "intel-rapl:0:0"): the packages.
    if (n.rfind("intel-rapl:", 0) == 0 && std::count(n.begin(), n.end(), ':') == 1)
      zones.push_back(d.path());
  }
  std::sort(zones.begin(), zones.end());
  for (const auto& z : zones) {
    std::string why;
    const auto name = read_line(z / "name", why);
    if (!name || name->rfind("package", 0) != 0) continue;
    const auto energy = read_line(z / "energy_uj", why);
    if (!energy) {
      r.zones.clear();
      r.why = why;
      return r;
    }
    PackageEnergyReading::Zone zone;
    zone.path = z.string();
    try {
      zone.energy_uj = std::stoull(*energy);
      std::string ignored;
      if (auto max = read_line(z / "max_energy_range_uj", ignored))
        zone.max_range_uj = std::stoull(*max);
    } catch (...) {
      r.zones.clear();
      r.why = (z / "energy_uj").string() + " does not hold a number";
      return r;
    }
    r.zones.push_back(zone);
  }
  if (r.zones.empty() && r.why.empty())
    r.why = root + " has no package zone (intel-rapl:N named package-N)";
  return r;
}

std::optional<double> package_energy_j(const PackageEnergyReading& begin,
                                       const PackageEnergyReading& end) noexcept {
  if (begin.zones.empty() || begin.zones.size() != end.zones.size()) return std::nullopt;
  double uj = 0;
  for (std::size_t i = 0; i < begin.zones.size(); ++i) {
    const auto& a = begin.zones[i];
    const auto& b = end.zones[i];
    if (a.path != b.path) return std::nullopt;
    if (b.energy_uj >= a.energy_uj)
      uj += static_cast<double>(b.energy_uj - a.energy_uj);
    else if (a.max_range_uj > 0)  // wrapped once
      uj += static_cast<double>(a.max_range_uj - a.energy_uj + b.energy_uj);
    else
      return std::nullopt;
  }
  return uj / 1e6;
}

}  // namespace fathom
