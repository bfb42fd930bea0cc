#include "framework/device_meter.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <iostream>

#include "base/warning_sink.h"

namespace fathom::detail {
namespace {

c10::Stream current_stream(const c10::Device& d) {
  return c10::impl::getDeviceGuardImpl(d.type())->getStream(d);
}

}  // namespace

DeviceMeter::DeviceMeter(std::optional<c10::Device> device,
                         std::unique_ptr<AllocatorAccess> allocator)
    : device_(device), memory_device_(device), allocator_(std::move(allocator)) {
  if (!allocator_) return;
  tracker_ = std::make_unique<MemoryPeakTracker>(allocator_->device());
  FollowResult followed = allocator_->follow(*tracker_);
  if (followed.follow) {
    follow_ = std::move(followed.follow);
  } else {
    // Peaks per phase without the allocator's own callbacks would mean resetting its peak
    // statistics, which are the user's: fathom measures nothing rather than that.
    tracker_.reset();
    memory_not_measured_ = std::move(followed.why_not);
  }
}

DeviceMeter::~DeviceMeter() {
  follow_.reset();  // the allocator lets go of the tracker before it goes
}

void DeviceMeter::disable_timing(const char* what, const std::exception& e) noexcept {
  detail::warn("device timing ", what, ": ", e.what());
  device_.reset();
}

int DeviceMeter::begin_memory() noexcept {
  if (!tracker_) return -1;
  const std::optional<AllocatorReading> now = allocator_->read();
  return now ? tracker_->open(*now) : -1;
}

std::optional<DeviceMemoryPeak> DeviceMeter::end_memory(int interval) noexcept {
  if (!tracker_ || interval < 0) return std::nullopt;
  const std::optional<AllocatorReading> now = allocator_->read();
  return now ? tracker_->close(interval, *now) : tracker_->close(interval);
}

int DeviceMeter::begin() noexcept {
  if (!enabled()) return -1;
  int slot;
  try {
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slots_.emplace_back();
      slot = static_cast<int>(slots_.size()) - 1;
    }
  } catch (const std::exception&) {
    return -1;  // no memory for a slot: this phase goes unmeasured
  }
  Slot& s = slots_[slot];
  s.timed = false;
  s.memory = begin_memory();
  if (device_) {
    try {
      // BACKEND_DEFAULT: a CUDA event with timing enabled (PYTORCH_DEFAULT disables timing).
      if (!s.start) s.start.emplace(device_->type(), c10::EventFlag::BACKEND_DEFAULT);
      if (!s.stop) s.stop.emplace(device_->type(), c10::EventFlag::BACKEND_DEFAULT);
      s.start->record(current_stream(*device_));
      s.timed = true;
    } catch (const std::exception& e) {
      disable_timing("disabled", e);
    }
  }
  return slot;
}

void DeviceMeter::end(int slot, PhaseRecord record) noexcept {
  if (slot < 0 || static_cast<std::size_t>(slot) >= slots_.size()) return;
  Slot& s = slots_[slot];
  if (s.timed && !device_) s.timed = false;  // timing failed since this phase began
  if (s.timed) {
    try {
      s.stop->record(current_stream(*device_));
    } catch (const std::exception& e) {
      disable_timing("failed", e);
      s.timed = false;
    }
  }
  record.device_memory = end_memory(s.memory);
  s.memory = -1;
  s.record = record;
  s.pending = true;
  try {
    pending_.push_back(slot);
  } catch (const std::exception&) {
    s.pending = false;  // lost, with its slot: better than a throw out of a phase's end
  }
}

void DeviceMeter::drain(bool wait,
                        const std::function<void(const PhaseRecord&)>& deliver) noexcept {
  while (!pending_.empty()) {
    const int slot = pending_.front();
    Slot& s = slots_[slot];
    if (s.timed) {
      try {
        // Events complete in stream order: when one is not done, later ones are not either.
        if (wait) {
          s.stop->synchronize();
        } else if (!s.stop->query()) {
          return;
        }
        s.record.device_ms = s.start->elapsedTime(*s.stop);
      } catch (const std::exception& e) {
        detail::warn("device time not read: ", e.what());
      }
    }
    PhaseRecord r = s.record;
    s.pending = false;
    s.timed = false;
    pending_.pop_front();
    try {
      free_.push_back(slot);
    } catch (const std::exception&) {
      detail::swallowed("framework/device_meter.cpp: an event slot");  // one slot fewer, no more
    }
    deliver(r);
  }
}

std::optional<std::int64_t> DeviceMeter::total_memory_bytes() const noexcept {
  if (!memory_device_) return std::nullopt;
  try {
    return static_cast<std::int64_t>(c10::getDeviceAllocator(memory_device_->type())
                                         ->getMemoryInfo(memory_device_->index())
                                         .second);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace fathom::detail
