#pragma once
// Device-side measurements of a phase that need no CUPTI: elapsed time between two events on the
// current stream, and the caching allocator's memory peaks. Timing is built on c10's
// device-generic Event, so no CUDA header is needed here; events are read only once complete:
// the training loop never waits on them except at epoch end.
//
// Memory peaks come from a MemoryPeakTracker fed by the allocator at every allocation and free
// (allocator_access.h), never from resetting the allocator's peak statistics: those stay what
// the user's own torch.cuda.max_memory_allocated() would say without fathom.
#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <fathom/records.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aggregate/memory_peak_tracker.h"
#include "framework/allocator_access.h"

namespace fathom::detail {

class DeviceMeter {
 public:
  // device: the accelerator whose current stream times phases, or nullopt for no timing.
  // allocator: that device's caching allocator, or null for no memory peaks; the meter follows
  // it from here to its destruction. With neither, every call is a no-op.
  DeviceMeter(std::optional<c10::Device> device, std::unique_ptr<AllocatorAccess> allocator);
  ~DeviceMeter();
  DeviceMeter(const DeviceMeter&) = delete;
  DeviceMeter& operator=(const DeviceMeter&) = delete;

  bool enabled() const noexcept { return device_.has_value() || tracker_ != nullptr; }

  // Starts measuring a phase; returns a slot for end(), or -1 when nothing is measured.
  int begin() noexcept;
  // Ends the phase of slot; record is handed to deliver once its device time is known.
  void end(int slot, PhaseRecord record) noexcept;
  // Hands over every record whose events completed; wait=true blocks until all have.
  void drain(bool wait, const std::function<void(const PhaseRecord&)>& deliver) noexcept;

  // Memory peaks over an interval that has no device time of its own: the gap between two steps,
  // an epoch. begin_memory returns -1 when memory is not measured.
  int begin_memory() noexcept;
  std::optional<DeviceMemoryPeak> end_memory(int interval) noexcept;

  // Why there are no memory peaks although there is an allocator to read; empty otherwise.
  const std::string& memory_not_measured() const noexcept { return memory_not_measured_; }

  std::optional<std::int64_t> total_memory_bytes() const noexcept;

 private:
  struct Slot {
    std::optional<c10::Event> start;
    std::optional<c10::Event> stop;
    bool timed = false;  // start was recorded: the record waits for stop
    int memory = -1;     // the tracker's interval
    PhaseRecord record;
    bool pending = false;
  };
  void disable_timing(const char* what, const std::exception& e) noexcept;

  std::optional<c10::Device> device_;
  std::optional<c10::Device> memory_device_;  // device_ stays here when timing fails
  std::unique_ptr<AllocatorAccess> allocator_;
  std::unique_ptr<MemoryPeakTracker> tracker_;  // null when memory is not measured
  std::unique_ptr<AllocatorFollow> follow_;     // after tracker_: stops before it goes
  std::string memory_not_measured_;
  std::deque<Slot> slots_;  // deque: slots never move, events stay valid
  std::vector<int> free_;
  std::deque<int> pending_;  // in completion order
};

}  // namespace fathom::detail
