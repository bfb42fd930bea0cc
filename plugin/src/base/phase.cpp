#include <fathom/phase.h>

namespace fathom {

std::optional<Phase> phase_from_name(std::string_view name) noexcept {
  for (Phase p : kAllPhases) {
    if (phase_name(p) == name) return p;
  }
  return std::nullopt;
}

}  // namespace fathom
