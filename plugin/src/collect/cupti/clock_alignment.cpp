#include "collect/cupti/clock_alignment.h"

#include <algorithm>
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

// A sample's weight: the inverse of its time's variance (uniform over its span), with a floor
// for the clocks' own resolution so that spans of 0 (exact samples) weigh alike.
std::int64_t span(const ClockSample& s) { return std::max<std::int64_t>(s.span_ns, 0); }

// The clocks' own resolution and the rounding of a reading's middle: what a span of 0 still
// leaves uncertain.
constexpr double kReadingNs = 100.0;

double weight_of(const ClockSample& s) {
  const double uncertainty = static_cast<double>(span(s)) + kReadingNs;
  return 1.0 / (uncertainty * uncertainty);
}

}  // namespace

void ClockAlignment::accumulate(ClockSample s) noexcept {
  // West's weighted update of the means and co-moments: stable over hours of nanoseconds.
  const double x = static_cast<double>(s.host_ns - origin_.host_ns);
  const double y = ticks_between(origin_.cupti, s.cupti);
  const double w = weight_of(s);
  weight_ += w;
  const double dx = x - mean_x_;
  mean_x_ += w / weight_ * dx;
  mean_y_ += w / weight_ * (y - mean_y_);
  sxx_ += w * dx * (x - mean_x_);
  sxy_ += w * dx * (y - mean_y_);
}

void ClockAlignment::reset(ClockSample first, ClockSample second) noexcept {
  origin_ = first;
  weight_ = mean_x_ = mean_y_ = sxx_ = sxy_ = 0;
  accumulate(first);
  accumulate(second);
  anchor_ = second;
  last_host_ns_ = second.host_ns;
  const double dh = static_cast<double>(second.host_ns - first.host_ns);
  const double dc = ticks_between(first.cupti, second.cupti);
  rate_ = dh > 0 && dc > 0 ? dc / dh : 1.0;  // two points: the least-squares line is theirs
  ns_ = std::fabs(rate_ - 1.0) < kNanosecondTolerance;
  if (ns_) rate_ = 1.0;
  ready_ = dh >= kMinBaselineNs && dc > 0;
}

std::int64_t ClockAlignment::error_ns(ClockSample s) const noexcept {
  return to_host(s.cupti) - s.host_ns;
}

bool ClockAlignment::add(ClockSample s) noexcept {
  if (!ready_) return false;
  const double since = std::fabs(static_cast<double>(s.host_ns - last_host_ns_));
  const double allowed = static_cast<double>(kJumpNs) + kRateTolerance * since +
                         static_cast<double>(std::max<std::int64_t>(s.span_ns, 0)) / 2;
  if (static_cast<double>(std::llabs(error_ns(s))) > allowed) return false;
  last_host_ns_ = s.host_ns;
  accumulate(s);
  if (!ns_ && sxx_ > 0 && sxy_ > 0) rate_ = sxy_ / sxx_;
  if (s.span_ns > std::max(kAnchorSpanNs, anchor_.span_ns)) return true;
  // The anchor moves only where the placement is off by more than the two readings can be (the
  // clocks drifted apart, the rate was off) or it was read loosely and this one tightly. Every
  // move shifts the records converted after it against those converted before (a launch in one
  // delivery, its kernel or the kernel before it in the next) by the readings' noise: moved at
  // every step end, a launch 3 ns before the GPU went idle came 3 ns after it in one replay of
  // an Nsight export in three, and that gap changed cause.
  const double uncertainty = static_cast<double>(span(s) + span(anchor_)) / 2 + kReadingNs;
  if (static_cast<double>(std::llabs(error_ns(s))) > uncertainty ||
      (anchor_.span_ns > kLooseSpanNs && 4 * s.span_ns <= anchor_.span_ns))
    anchor_ = s;
  return true;
}

std::int64_t ClockAlignment::to_host(std::uint64_t cupti) const noexcept {
  if (cupti == 0) return 0;
  const std::int64_t d = static_cast<std::int64_t>(cupti - anchor_.cupti);
  if (ns_) return anchor_.host_ns + d;
  return anchor_.host_ns + static_cast<std::int64_t>(std::llround(static_cast<double>(d) / rate_));
}

}  // namespace fathom::cupti
