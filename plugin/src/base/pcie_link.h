#pragma once
// What a PCIe link can carry: the one table that the device telemetry (collect/) and the transfer
// analysis (analyze/) both read.
#include <optional>

namespace fathom {

// The theoretical one-direction bandwidth of a PCIe link, GB/s (10^9 bytes), after line coding:
// gen1/2 8b/10b, gen3-5 128b/130b, gen6 FLIT. nullopt for a generation or width it does not know.
std::optional<double> pcie_peak_gb_per_s(int generation, int width) noexcept;

}  // namespace fathom
