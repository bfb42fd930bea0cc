#pragma once
// Integers read from JSON that fathom did not write. nlohmann's get<int>() on 1e300 is a
// float-to-integer conversion out of range (undefined behaviour), and on -1 into an unsigned
// field a silent wrap; json_integer says what is wrong instead, as a fathom::Error that the
// reader completes with the file and the place.
#include <fathom/error.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace fathom::detail {

// Trace and record times fathom accepts, in nanoseconds: 0 to 2^62 (past the year 2100). The
// difference and the sum of any two fit in 64 bits, so the analyses' arithmetic never overflows.
inline constexpr std::int64_t kMaxTimeNs = std::int64_t{1} << 62;

inline std::int64_t checked_time_ns(std::int64_t ns, const char* what) {
  if (ns < 0 || ns > kMaxTimeNs)
    throw Error(fmt::format("{} {} ns is outside 0 to 2^62 ns (corrupted?)", what, ns));
  return ns;
}

template <typename T, typename Json>
T json_integer(const Json& j) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  using Limits = std::numeric_limits<T>;
  if (j.is_number_unsigned()) {
    const auto v = j.template get<std::uint64_t>();
    if (v <= static_cast<std::uint64_t>(Limits::max())) return static_cast<T>(v);
  } else if (j.is_number_integer()) {
    const auto v = j.template get<std::int64_t>();
    if (v >= 0 ? static_cast<std::uint64_t>(v) <= static_cast<std::uint64_t>(Limits::max())
               : (Limits::is_signed && v >= static_cast<std::int64_t>(Limits::min())))
      return static_cast<T>(v);
  } else if (j.is_number_float()) {
    const double v = j.template get<double>();
    // Bounds as doubles: 2^63 itself is one past int64's largest value.
    const double upper = std::ldexp(1.0, Limits::digits);
    const double lower = Limits::is_signed ? -upper : 0.0;
    if (v >= lower && v < upper) return static_cast<T>(v);
  } else {
    throw Error(fmt::format("expected an integer, found {}", j.type_name()));
  }
  throw Error(
      fmt::format("{} does not fit the field ({} to {})", j.dump(), Limits::min(), Limits::max()));
}

}  // namespace fathom::detail
