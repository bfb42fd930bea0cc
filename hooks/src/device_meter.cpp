#include "device_meter.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <iostream>

namespace fathom::detail {
namespace {

c10::Stream current_stream(const c10::Device& d) {
  return c10::impl::getDeviceGuardImpl(d.type())->getStream(d);
}

constexpr auto kAggregate = c10::CachingAllocator::StatType::AGGREGATE;

}  // namespace

DeviceMeter::DeviceMeter(std::optional<c10::Device> device) : device_(device) {}

int DeviceMeter::begin() noexcept {
  if (!device_) return -1;
  try {
    int slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      // BACKEND_DEFAULT: a CUDA event with timing enabled (PYTORCH_DEFAULT disables timing).
      slots_.push_back(Slot{c10::Event(device_->type(), c10::EventFlag::BACKEND_DEFAULT),
                            c10::Event(device_->type(), c10::EventFlag::BACKEND_DEFAULT), 0, 0,
                            PhaseRecord{}, false});
      slot = static_cast<int>(slots_.size()) - 1;
    }
    Slot& s = slots_[slot];
    auto* allocator = c10::getDeviceAllocator(device_->type());
    auto stats = allocator->getDeviceStats(device_->index());
    s.retries_at_begin = stats.num_alloc_retries;
    s.ooms_at_begin = stats.num_ooms;
    // Peaks are per phase: this resets the allocator's peak counters, as
    // torch.cuda.reset_peak_memory_stats() would.
    allocator->resetPeakStats(device_->index());
    s.start.record(current_stream(*device_));
    return slot;
  } catch (const std::exception& e) {
    std::cerr << "fathom: device timing disabled: " << e.what() << "\n";
    device_.reset();
    return -1;
  }
}

void DeviceMeter::end(int slot, PhaseRecord record) noexcept {
  if (!device_ || slot < 0) return;
  try {
    Slot& s = slots_[slot];
    s.stop.record(current_stream(*device_));
    auto stats = c10::getDeviceAllocator(device_->type())->getDeviceStats(device_->index());
    record.device_memory = DeviceMemoryPeak{
        stats.allocated_bytes[static_cast<std::size_t>(kAggregate)].peak,
        stats.reserved_bytes[static_cast<std::size_t>(kAggregate)].peak,
        stats.num_alloc_retries - s.retries_at_begin, stats.num_ooms - s.ooms_at_begin};
    s.record = record;
    s.pending = true;
    pending_.push_back(slot);
  } catch (const std::exception& e) {
    std::cerr << "fathom: device timing failed: " << e.what() << "\n";
  }
}

void DeviceMeter::drain(bool wait,
                        const std::function<void(const PhaseRecord&)>& deliver) noexcept {
  while (!pending_.empty()) {
    const int slot = pending_.front();
    Slot& s = slots_[slot];
    try {
      // Events complete in stream order: when one is not done, later ones are not either.
      if (wait) {
        s.stop.synchronize();
      } else if (!s.stop.query()) {
        return;
      }
      s.record.device_ms = s.start.elapsedTime(s.stop);
    } catch (const std::exception& e) {
      std::cerr << "fathom: device time not read: " << e.what() << "\n";
    }
    PhaseRecord r = s.record;
    s.pending = false;
    pending_.pop_front();
    free_.push_back(slot);
    deliver(r);
  }
}

std::optional<std::int64_t> DeviceMeter::total_memory_bytes() const noexcept {
  if (!device_) return std::nullopt;
  try {
    return static_cast<std::int64_t>(
        c10::getDeviceAllocator(device_->type())->getMemoryInfo(device_->index()).second);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace fathom::detail
