#include <fathom/error.h>
#include <fathom/memory_budget.h>
#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>

#include "base/bytes_text.h"
#include "base/terminal_text.h"

namespace fathom {
namespace {

constexpr std::array<std::pair<std::string_view, double>, 12> kUnits{{{"KiB", 1024.0},
                                                                      {"MiB", 1048576.0},
                                                                      {"GiB", 1073741824.0},
                                                                      {"TiB", 1099511627776.0},
                                                                      {"KB", 1e3},
                                                                      {"MB", 1e6},
                                                                      {"GB", 1e9},
                                                                      {"TB", 1e12},
                                                                      {"K", 1024.0},
                                                                      {"M", 1048576.0},
                                                                      {"G", 1073741824.0},
                                                                      {"T", 1099511627776.0}}};

// Below these no real run fits: a budget this small is a typo (1e-300, a missing unit).
constexpr double kMinFraction = 0.01;
constexpr double kMinBytes = 1e6;

[[noreturn]] void reject(std::string_view text, std::string_view what, std::string_view why) {
  throw Error(
      fmt::format("{}='{}' is not a memory budget ({}); write bytes such as 12GiB, 512MiB, "
                  "8GB or 1000000, or a fraction of device memory such as 80% or 0.8",
                  what, detail::echoed_value(text), why));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

MemoryBudget parse_memory_budget(std::string_view text, std::string_view what) {
  std::string_view s = trim(text);
  if (s.empty()) reject(text, what, "empty");
  double value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || !std::isfinite(value)) reject(text, what, "no number");
  const std::string_view number(s.data(), static_cast<std::size_t>(end - s.data()));
  const std::string_view unit =
      trim(std::string_view(end, static_cast<std::size_t>(s.data() + s.size() - end)));
  if (value <= 0) reject(text, what, "it must be positive");
  if (unit == "%") {
    if (value > 100) reject(text, what, "a percentage above 100");
    if (value < kMinFraction * 100) reject(text, what, "below 1 %, the smallest budget");
    return MemoryBudget::fraction(value / 100.0);
  }
  if (unit.empty() && number.find_first_of(".eE") != std::string_view::npos) {
    if (value > 1) reject(text, what, "a fraction above 1; write bytes as a whole number");
    if (value < kMinFraction) reject(text, what, "below 0.01, the smallest budget");
    return MemoryBudget::fraction(value);
  }
  double scale = 1.0;
  if (!unit.empty()) {
    bool known = false;
    for (const auto& [name, factor] : kUnits) {
      if (unit == name) {
        scale = factor;
        known = true;
        break;
      }
    }
    if (!known) reject(text, what, fmt::format("unknown unit '{}'", detail::echoed_value(unit)));
  }
  const double b = value * scale;
  if (b >= 9.2e18) reject(text, what, "too large");
  if (b < kMinBytes) reject(text, what, "below 1000000 bytes (1 MB), the smallest budget");
  return MemoryBudget::bytes(static_cast<std::int64_t>(b));
}

std::string memory_budget_text(const MemoryBudget& b) {
  if (b.is_fraction()) return fmt::format("{:g} % of device memory", b.fraction_of_whole() * 100.0);
  return detail::bytes_text(b.byte_count());
}

}  // namespace fathom
