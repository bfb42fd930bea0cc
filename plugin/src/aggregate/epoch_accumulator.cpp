#include "aggregate/epoch_accumulator.h"

#include <algorithm>

namespace fathom {
namespace {

constexpr double ms(std::int64_t ns) noexcept { return static_cast<double>(ns) / 1e6; }

void keep_peak(std::optional<DeviceMemoryPeak>& into, const DeviceMemoryPeak& m) noexcept {
  if (!into) {
    into = m;
    return;
  }
  into->peak_allocated_bytes = std::max(into->peak_allocated_bytes, m.peak_allocated_bytes);
  into->peak_reserved_bytes = std::max(into->peak_reserved_bytes, m.peak_reserved_bytes);
  into->alloc_retries += m.alloc_retries;
  into->ooms += m.ooms;
}

}  // namespace

EpochAccumulator::EpochAccumulator(std::int64_t epoch_index, std::int64_t begin_ns) noexcept
    : begin_ns_(begin_ns) {
  summary_.index = epoch_index;
  for (Phase p : kAllPhases) summary_.phases[static_cast<std::size_t>(p)].phase = p;
  inferred_data_.phase = Phase::Data;
}

void EpochAccumulator::add(const PhaseRecord& r) noexcept {
  // A loop that times its own loading is not second-guessed in the series either.
  if (!(r.inferred && r.phase == Phase::Data && summary_.phases[0].count > 0)) series_.add(r);
  PhaseSummary& s = r.inferred && r.phase == Phase::Data
                        ? inferred_data_
                        : summary_.phases[static_cast<std::size_t>(r.phase)];
  const double wall = ms(r.end_ns - r.begin_ns);
  ++s.count;
  s.aborted += r.aborted ? 1 : 0;
  s.inferred = s.inferred || r.inferred;
  s.wall_ms_total += wall;
  s.wall_ms_max = std::max(s.wall_ms_max, wall);
  if (r.device_ms) s.device_ms_total = s.device_ms_total.value_or(0.0) + *r.device_ms;
  if (r.device_memory) {
    keep_peak(s.device_memory, *r.device_memory);
    keep_peak(summary_.device_memory, *r.device_memory);
  }
  if (r.rss_bytes) s.rss_bytes_max = std::max(s.rss_bytes_max.value_or(0), *r.rss_bytes);
}

void EpochAccumulator::add(const StepRecord& r) noexcept {
  series_.add(r);
  const double wall = ms(r.end_ns - r.begin_ns);
  ++summary_.steps;
  summary_.failed_steps += r.failed ? 1 : 0;
  summary_.samples += r.samples;
  summary_.step_ms_total += wall;
  summary_.step_ms_max = std::max(summary_.step_ms_max, wall);
}

void EpochAccumulator::add(const CopyRecord& r) {
  auto& copies = summary_.copies;
  auto it = std::find_if(copies.begin(), copies.end(), [&](const CopySummary& c) {
    return c.direction == r.direction && c.pinned == r.pinned && c.non_blocking == r.non_blocking;
  });
  if (it == copies.end()) {
    copies.push_back(CopySummary{r.direction, r.pinned, r.non_blocking, 0, 0, 0.0});
    it = copies.end() - 1;
  }
  ++it->count;
  it->bytes += r.bytes;
  it->wall_ms_total += ms(r.end_ns - r.begin_ns);
}

EpochSummary EpochAccumulator::finish(std::int64_t end_ns, bool by_exception) const {
  EpochSummary s = summary_;
  PhaseSummary& data = s.phases[static_cast<std::size_t>(Phase::Data)];
  if (data.count == 0) data = inferred_data_;
  s.wall_ms = ms(end_ns - begin_ns_);
  s.ended_by_exception = by_exception;
  if (!series_.series().points.empty()) s.series = series_.series();
  return s;
}

}  // namespace fathom
