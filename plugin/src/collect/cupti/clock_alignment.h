#pragma once
// Moves CUPTI timestamps onto fathom's clock (now_ns, a steady clock).
//
// CUPTI stamps records in nanoseconds of CLOCK_REALTIME, unless a client registered a timestamp
// callback (cuptiActivityRegisterTimestampCallback): then every record carries whatever that
// callback returns, and torch 2.11's Kineto registers one that returns raw TSC ticks on x86,
// for the rest of the process. cuptiGetTimestamp follows the same source. So the unit is
// measured, not assumed: pairs of (fathom time, CUPTI time) taken at different moments give the
// rate; a rate within 0.1 % of one tick per nanosecond is nanoseconds, anything else is converted
// and reported. A sample far from where the current fit predicts (far for the time since the
// last sample) means the source changed under fathom (a callback registered mid-run): the fit
// starts over and says so.
#include <cstdint>
#include <optional>

namespace fathom::cupti {

struct ClockSample {
  std::int64_t host_ns = 0;  // now_ns() at the reading (the middle of the two host reads)
  std::uint64_t cupti = 0;   // cuptiGetTimestamp at the same moment
  // How far apart the host reads around it were: host_ns is off by up to half of it. Wide when
  // the thread was preempted between them (milliseconds on a loaded machine).
  std::int64_t span_ns = 0;
};

class ClockAlignment {
 public:
  // Samples closer than this apart give no rate (their noise would dominate).
  static constexpr std::int64_t kMinBaselineNs = 100'000;
  // A sample farther than kJumpNs plus kRateTolerance of the time since the last sample from the
  // fit's prediction means the source changed. The relative part is for the rate's own error: a
  // TSC rate calibrated over 200 us is off by ~5e-4, and the clocks drift apart by up to 500 ppm
  // (NTP slewing CLOCK_REALTIME), so a fixed bound alone is exceeded by a 4 s step (issue 23).
  // A real change of source is off by the clocks' origins (seconds to years) or their rates
  // (ticks vs ns, 2-3x): far beyond 1%.
  static constexpr std::int64_t kJumpNs = 2'000'000;
  static constexpr double kRateTolerance = 1e-2;
  // A sample read across a wider span than this does not place records: it only refines the
  // rate, with the little weight its uncertainty gives it.
  static constexpr std::int64_t kAnchorSpanNs = 20'000;
  // An anchor read across more than this gives way to a reading four times tighter even where
  // the two agree within their spans.
  static constexpr std::int64_t kLooseSpanNs = 1'000;

  // Starts a fit from two samples at least kMinBaselineNs apart.
  void reset(ClockSample first, ClockSample second) noexcept;
  // Refines the fit with a later sample; false when the sample does not fit (the source
  // changed): then the caller resets with fresh samples.
  bool add(ClockSample s) noexcept;

  bool ready() const noexcept { return ready_; }
  // CUPTI ticks per nanosecond of fathom's clock (1 when the unit is nanoseconds).
  double ticks_per_ns() const noexcept { return rate_; }
  bool nanoseconds() const noexcept { return ns_; }
  // A CUPTI timestamp on fathom's clock; 0 stays 0 (CUPTI's "not measured").
  std::int64_t to_host(std::uint64_t cupti) const noexcept;
  // Where the fit puts s's CUPTI time on fathom's clock, minus where it was taken.
  std::int64_t error_ns(ClockSample s) const noexcept;

 private:
  void accumulate(ClockSample s) noexcept;

  // The rate is the weighted least-squares slope over every sample since the reset (a sample
  // weighs by its span's uncertainty), kept as running means and co-moments about the first
  // sample, in doubles of differences (CLOCK_REALTIME ns are past a double's mantissa).
  ClockSample origin_{};
  double weight_ = 0, mean_x_ = 0, mean_y_ = 0, sxx_ = 0, sxy_ = 0;
  // Records are placed from a tight sample, moved to a later one where the fit's prediction is
  // off by more than the two samples' uncertainty: the rate's error and the clocks' slow drift
  // apart (NTP slewing) never accumulate past that, and readings' noise alone never moves
  // records converted in one delivery against those of the next.
  ClockSample anchor_{};
  std::int64_t last_host_ns_ = 0;
  double rate_ = 1.0;
  bool ns_ = true;
  bool ready_ = false;
};

}  // namespace fathom::cupti
