#include "aggregate/step_series_builder.h"

#include <algorithm>

#include "base/thresholds.h"

namespace fathom {

void StepSeriesBuilder::add(const StepRecord& r) noexcept {
  if (r.index % s_.stride != 0) return;
  try {
    if (s_.points.size() >= thresholds::kStepSeriesCapacity) {
      std::size_t kept = 0;
      for (std::size_t i = 0; i < s_.points.size(); i += 2) s_.points[kept++] = s_.points[i];
      s_.points.resize(kept);
      s_.stride *= 2;
      if (r.index % s_.stride != 0) return;
    }
    StepPoint* p = point_of(r.index);
    if (!p) {
      s_.points.push_back(StepPoint{});
      p = &s_.points.back();
      p->step = r.index;
    }
    p->step_ms = static_cast<double>(r.end_ns - r.begin_ns) / 1e6;
  } catch (...) {
    // Out of memory: the series is a bounded extra; the epoch's totals do not depend on it.
  }
}

void StepSeriesBuilder::add(const PhaseRecord& r) noexcept {
  if (r.step % s_.stride != 0) return;
  StepPoint* p = point_of(r.step);
  if (!p) {
    // The phase came first (the inferred data gap opens the step): the step record fills it.
    if (s_.points.size() >= thresholds::kStepSeriesCapacity) return;
    try {
      s_.points.push_back(StepPoint{});
    } catch (...) {
      return;
    }
    p = &s_.points.back();
    p->step = r.step;
  }
  p->phase_ms[static_cast<std::size_t>(r.phase)] +=
      static_cast<double>(r.end_ns - r.begin_ns) / 1e6;
  std::optional<std::int64_t> m;
  if (r.device_memory) {
    m = r.device_memory->peak_allocated_bytes;
    s_.memory = "device allocated peak";
  } else if (r.rss_bytes) {
    m = r.rss_bytes;
    if (s_.memory.empty()) s_.memory = "resident (RSS)";
  }
  if (m) p->memory_bytes = std::max(p->memory_bytes.value_or(0), *m);
}

StepPoint* StepSeriesBuilder::point_of(std::int64_t step) noexcept {
  // Records arrive for the last few steps: search from the back.
  for (auto it = s_.points.rbegin(); it != s_.points.rend() && it - s_.points.rbegin() < 8; ++it)
    if (it->step == step) return &*it;
  return nullptr;
}

}  // namespace fathom
