#include "bytes_text.h"

#include <fmt/format.h>

namespace fathom::detail {

std::string bytes_text(std::int64_t b) {
  const double v = static_cast<double>(b);
  if (v >= 1073741824.0) return fmt::format("{:.2f} GiB", v / 1073741824.0);
  if (v >= 1048576.0) return fmt::format("{:.1f} MiB", v / 1048576.0);
  if (v >= 1024.0) return fmt::format("{:.1f} KiB", v / 1024.0);
  return fmt::format("{} B", b);
}

std::string bytes_text(const std::optional<std::int64_t>& bytes, std::string_view missing) {
  return bytes ? bytes_text(*bytes) : std::string(missing);
}

}  // namespace fathom::detail
