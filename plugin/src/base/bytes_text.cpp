#include "base/bytes_text.h"

#include <fmt/format.h>

#include <cmath>

namespace fathom::detail {

std::string bytes_text(double v) {
  const double a = std::fabs(v);
  if (a >= 1073741824.0) return fmt::format("{:.2f} GiB", v / 1073741824.0);
  if (a >= 1048576.0) return fmt::format("{:.1f} MiB", v / 1048576.0);
  if (a >= 1024.0) return fmt::format("{:.1f} KiB", v / 1024.0);
  return fmt::format("{:.0f} B", v);
}

std::string bytes_text(std::int64_t b) { return bytes_text(static_cast<double>(b)); }

std::string bytes_text(const std::optional<std::int64_t>& bytes, std::string_view missing) {
  return bytes ? bytes_text(*bytes) : std::string(missing);
}

}  // namespace fathom::detail
