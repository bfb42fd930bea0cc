#pragma once
// Device-side measurements of a phase that need no CUPTI: elapsed time between two events on the
// current stream, and the caching allocator's peaks. Built on c10's device-generic Event and
// DeviceAllocator, so no CUDA header is needed here. Events are read only once complete: the
// training loop never waits on them except at epoch end.
#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <fathom/records.h>

#include <deque>
#include <functional>
#include <optional>
#include <vector>

namespace fathom::detail {

class DeviceMeter {
 public:
  // device: the accelerator to measure, or nullopt for none (every call is then a no-op).
  explicit DeviceMeter(std::optional<c10::Device> device);
  bool enabled() const noexcept { return device_.has_value(); }

  // Starts measuring a phase; returns a slot for end().
  int begin() noexcept;
  // Ends the phase of slot; record is handed to deliver once its device time is known.
  void end(int slot, PhaseRecord record) noexcept;
  // Hands over every record whose events completed; wait=true blocks until all have.
  void drain(bool wait, const std::function<void(const PhaseRecord&)>& deliver) noexcept;

  std::optional<std::int64_t> total_memory_bytes() const noexcept;

 private:
  struct Slot {
    c10::Event start;
    c10::Event stop;
    std::int64_t retries_at_begin = 0;
    std::int64_t ooms_at_begin = 0;
    PhaseRecord record;
    bool pending = false;
  };
  std::optional<c10::Device> device_;
  std::deque<Slot> slots_;  // deque: slots never move, events stay valid
  std::vector<int> free_;
  std::deque<int> pending_;  // in completion order
};

}  // namespace fathom::detail
