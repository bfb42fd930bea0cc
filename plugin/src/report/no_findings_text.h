#pragma once
// What every writer says of an epoch without findings. Observe mode makes none (it measures and
// does not advise), so "none above the thresholds" there claimed a check that never ran
// (issue 24).
#include <fathom/report.h>

#include <string_view>

namespace fathom::detail {

inline std::string_view no_findings_text(const Environment& env) noexcept {
  return env.mode == Mode::Observe
             ? "none made: observe mode measures and does not advise (FATHOM_MODE=suggest advises)"
             : "none above the thresholds";
}

}  // namespace fathom::detail
