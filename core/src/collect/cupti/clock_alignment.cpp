#include "collect/cupti/clock_alignment.h"

#include <cmath>
#include <cstdlib>

namespace fathom::cupti {
namespace {

// CUPTI time differences, taken in integers first: CLOCK_REALTIME nanoseconds (about 1.8e18)
// are past a double's 53-bit mantissa, which would round every timestamp to 256 ns.
double ticks_between(std::uint64_t from, std::uint64_t to) {
  return static_cast<double>(static_cast<std::int64_t>(to - from));
}

// Within this of one tick per ns, the unit is nanoseconds and the rate is taken as exactly 1, so
// the noise of two readings never stretches durations.
constexpr double kNanosecondTolerance = 1e-3;

}  // namespace

void ClockAlignment::reset(ClockSample first, ClockSample second) noexcept {
  first_ = first;
  last_ = second;
  const double dh = static_cast<double>(second.host_ns - first.host_ns);
  const double dc = ticks_between(first.cupti, second.cupti);
  rate_ = dh > 0 && dc > 0 ? dc / dh : 1.0;
  ns_ = std::fabs(rate_ - 1.0) < kNanosecondTolerance;
  if (ns_) rate_ = 1.0;
  ready_ = dh >= kMinBaselineNs && dc > 0;
}

std::int64_t ClockAlignment::error_ns(ClockSample s) const noexcept {
  return to_host(s.cupti) - s.host_ns;
}

bool ClockAlignment::add(ClockSample s) noexcept {
  if (!ready_) return false;
  const double since = std::fabs(static_cast<double>(s.host_ns - last_.host_ns));
  const double allowed = static_cast<double>(kJumpNs) + kRateTolerance * since;
  if (static_cast<double>(std::llabs(error_ns(s))) > allowed) return false;
  last_ = s;
  if (!ns_) {
    // The longest baseline gives the best rate.
    const double dh = static_cast<double>(s.host_ns - first_.host_ns);
    const double dc = ticks_between(first_.cupti, s.cupti);
    if (dh > 0 && dc > 0) rate_ = dc / dh;
  }
  return true;
}

std::int64_t ClockAlignment::to_host(std::uint64_t cupti) const noexcept {
  if (cupti == 0) return 0;
  // Anchored at the latest sample: the error of the rate grows with the distance from it only.
  const std::int64_t d = static_cast<std::int64_t>(cupti - last_.cupti);
  if (ns_) return last_.host_ns + d;
  return last_.host_ns + static_cast<std::int64_t>(std::llround(static_cast<double>(d) / rate_));
}

}  // namespace fathom::cupti
