#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fathom {

// The phases of a training step, in the order a step runs them.
enum class Phase : std::uint8_t { Data, Copy, Forward, Backward, Optimizer };
inline constexpr std::size_t kPhaseCount = 5;
inline constexpr std::array<Phase, kPhaseCount> kAllPhases{Phase::Data, Phase::Copy, Phase::Forward,
                                                           Phase::Backward, Phase::Optimizer};

constexpr std::string_view phase_name(Phase p) noexcept {
  constexpr std::array<std::string_view, kPhaseCount> names{"data", "copy", "forward", "backward",
                                                            "optimizer"};
  return names[static_cast<std::size_t>(p)];
}

std::optional<Phase> phase_from_name(std::string_view name) noexcept;

}  // namespace fathom
