#include "base/pcie_link.h"

#include <algorithm>
#include <array>
#include <cstddef>

namespace fathom {

std::optional<double> pcie_peak_gb_per_s(int generation, int width) noexcept {
  // GT/s per lane times coding efficiency, over 8 bits.
  constexpr std::array<double, 6> kLaneGBps{2.5 * 8 / 10 / 8,     5.0 * 8 / 10 / 8,
                                            8.0 * 128 / 130 / 8,  16.0 * 128 / 130 / 8,
                                            32.0 * 128 / 130 / 8, 64.0 * 242 / 256 / 8};
  constexpr std::array<int, 7> kWidths{1, 2, 4, 8, 12, 16, 32};
  if (generation < 1 || generation > static_cast<int>(kLaneGBps.size())) return std::nullopt;
  if (std::find(kWidths.begin(), kWidths.end(), width) == kWidths.end()) return std::nullopt;
  return kLaneGBps[static_cast<std::size_t>(generation - 1)] * width;
}

}  // namespace fathom
