// The per-step table (AggregatorLimits::step_rows): each step annotation a row, the GPU work its
// thread launched while it was open, and the devices' busy time inside its window.
#include "aggregate/aggregator_state.h"

namespace fathom {

void GpuAggregator::Impl::add_step_row(const AnnotationRecord& r) {
  if (step_rows.size() >= limits.step_rows) {
    ++folded_steps;
    return;
  }
  const auto row = static_cast<std::uint32_t>(step_rows.size());
  step_rows.push_back(StepGpuStats{r.name, r.start_ns, r.end_ns, {}, 0});
  step_busy.emplace_back();
  const StepWindow w{r.start_ns, r.end_ns, r.thread, row};
  // Readers deliver steps by start, a session by end: either way nearly in order.
  auto at = std::upper_bound(step_windows.begin(), step_windows.end(), w.start,
                             [](std::int64_t v, const StepWindow& s) { return v < s.start; });
  step_windows.insert(at, w);
}

std::int64_t GpuAggregator::Impl::step_at(std::int64_t t, std::uint64_t thread) const {
  if (step_windows.empty() || t == kNever) return -1;
  auto it = std::upper_bound(step_windows.begin(), step_windows.end(), t,
                             [](std::int64_t v, const StepWindow& s) { return v < s.start; });
  // Steps do not overlap on one thread; a few candidates back cover steps of other threads.
  std::int64_t any = -1;
  for (int look = 0; it != step_windows.begin() && look < 8; ++look) {
    --it;
    if (it->end <= t) continue;
    if (it->thread == thread) return it->row;
    if (any < 0) any = it->row;
  }
  return any;
}

void GpuAggregator::Impl::add_step_busy(std::int32_t device, std::int64_t s, std::int64_t e) {
  if (step_windows.empty()) return;
  auto it = std::upper_bound(step_windows.begin(), step_windows.end(), s,
                             [](std::int64_t v, const StepWindow& w) { return v < w.start; });
  if (it != step_windows.begin()) --it;
  for (; it != step_windows.end() && it->start < e; ++it) {
    const std::int64_t a = std::max(s, it->start), b = std::min(e, it->end);
    if (b <= a) continue;
    StepBusy& busy = step_busy[it->row];
    const auto device_of = [](const std::pair<std::int32_t, Union>& p) { return p.first; };
    std::size_t at = busy.index.find(busy.devices, device, device_of);
    if (at == DeviceIndex::npos) {
      busy.devices.emplace_back(device, Union{});
      try {
        busy.index.appended(busy.devices, device_of);
      } catch (...) {
        busy.devices.pop_back();
        throw;
      }
      at = busy.devices.size() - 1;
    }
    busy.devices[at].second.add(a, b);
  }
}

}  // namespace fathom
