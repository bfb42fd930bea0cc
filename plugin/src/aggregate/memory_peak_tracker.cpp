#include "aggregate/memory_peak_tracker.h"

#include <algorithm>

#include "base/warning_sink.h"

namespace fathom {
namespace {

// allocated - allocated_total + freed_total stays the same until someone resets the allocator's
// accumulated counters: a change says the totals restarted from zero in between.
std::int64_t offset(const AllocatorReading& r) noexcept {
  return r.allocated - r.allocated_total + r.freed_total;
}

bool totals_ran_on(const AllocatorReading& from, const AllocatorReading& to) noexcept {
  return offset(from) == offset(to) && to.allocated_total >= from.allocated_total &&
         to.freed_total >= from.freed_total;
}

// A boundary reading is taken outside the allocator's lock, so an allocation on another thread
// can be applied before it: then its totals lag behind the newest reading's.
bool behind(const AllocatorReading& r, const AllocatorReading& newest) noexcept {
  return offset(r) == offset(newest) && r.allocated_total <= newest.allocated_total &&
         r.freed_total <= newest.freed_total &&
         (r.allocated_total < newest.allocated_total || r.freed_total < newest.freed_total);
}

// The highest allocated bytes between two successive readings: the rise comes first (just after
// `from`), the fall last (just before `to`).
std::int64_t highest_between(const AllocatorReading& from, const AllocatorReading& to) noexcept {
  std::int64_t handed_out = to.allocated_total - from.allocated_total;
  if (!totals_ran_on(from, to)) {
    // The totals restarted in between, before the fall (the fall and `to` are one step of the
    // allocator): what was handed out is the net change plus everything freed since.
    handed_out = std::max<std::int64_t>(0, to.allocated - from.allocated + to.freed_total);
  }
  return std::max(from.allocated + handed_out, to.allocated);
}

std::int64_t since(std::int64_t now, std::int64_t then) noexcept {
  return now >= then ? now - then : now;  // a reset in between: all of now is since
}

}  // namespace

void MemoryPeakTracker::fold(std::int64_t allocated, std::int64_t reserved) noexcept {
  for (Interval& i : intervals_) {
    if (!i.open) continue;
    i.peak_allocated = std::max(i.peak_allocated, allocated);
    i.peak_reserved = std::max(i.peak_reserved, reserved);
  }
}

void MemoryPeakTracker::apply(const AllocatorReading& r, bool boundary) noexcept {
  if (!last_) {
    fold(r.allocated, r.reserved);
    last_ = r;
    return;
  }
  if (boundary && behind(r, *last_)) {
    // Older than what was applied already: a state the device was really in, before now.
    fold(r.allocated, r.reserved);
    return;
  }
  // Reserved bytes rise only just before a reading (segment allocated or mapped) and fall only
  // around one, so the readings themselves hold its highest points.
  fold(highest_between(*last_, r), r.reserved);
  last_ = r;
}

void MemoryPeakTracker::observe(const AllocatorReading& r) noexcept {
  if (r.device != device_) return;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    apply(r, /*boundary=*/false);
  } catch (...) {
    // A lock that fails costs one reading: a peak may come out low, nothing worse.
    detail::swallowed("aggregate/memory_peak_tracker.cpp");
  }
}

int MemoryPeakTracker::open(const AllocatorReading& now) noexcept {
  if (now.device != device_) return -1;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    apply(now, /*boundary=*/true);
    for (int id = 0; id < kMaxOpen; ++id) {
      Interval& i = intervals_[static_cast<std::size_t>(id)];
      if (i.open) continue;
      // Starts from the newest state known, which a lagging `now` is not.
      i = Interval{true, last_->allocated, last_->reserved, last_->alloc_retries, last_->ooms};
      return id;
    }
  } catch (...) {
    detail::swallowed("aggregate/memory_peak_tracker.cpp");
  }
  return -1;
}

std::optional<DeviceMemoryPeak> MemoryPeakTracker::finish(int interval) noexcept {
  if (interval < 0 || interval >= kMaxOpen) return std::nullopt;
  Interval& i = intervals_[static_cast<std::size_t>(interval)];
  if (!i.open) return std::nullopt;
  i.open = false;
  return DeviceMemoryPeak{i.peak_allocated, i.peak_reserved,
                          since(last_->alloc_retries, i.retries_at_open),
                          since(last_->ooms, i.ooms_at_open)};
}

std::optional<DeviceMemoryPeak> MemoryPeakTracker::close(int interval,
                                                         const AllocatorReading& now) noexcept {
  if (now.device != device_) return close(interval);
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    apply(now, /*boundary=*/true);
    return finish(interval);
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<DeviceMemoryPeak> MemoryPeakTracker::close(int interval) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    return finish(interval);
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace fathom
