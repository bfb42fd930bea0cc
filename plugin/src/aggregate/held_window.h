#pragma once
// The GPU records held for the next sweep, and the order the sweep reads them in: by device, then
// start, ties in arrival order. CUPTI delivers records nearly in that order, but not quite (a
// buffer of copies arrives after the kernels that ran after them), and sorting the whole window
// whenever a few are out of order cost a sixth of the aggregation. Here each device has a run the
// in-order records are appended to, and a side list for the few that start before the run's last
// record; only the side list is sorted, at the sweep, and merged into the run as it is read.
//
// Why ties come out in arrival order: a record goes to the side list only when it starts strictly
// before the run's last record, so every run record that ties with it arrived earlier (read the
// run's first), and side records that tie are ordered by when they arrived (seq).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "aggregate/device_index.h"

namespace fathom::aggregation {
inline constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::min();

enum class HeldType : std::uint8_t { Kernel, Memcpy, Memset };

// A GPU record as the sweep needs it: 80 bytes, whatever the kernel's name.
struct HeldGpu {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t bytes = 0;
  std::uint64_t correlation = 0;
  std::uint64_t external_id = 0;
  std::int64_t launch_ns = kNever;  // host time of the launch, found by the sweep
  std::int64_t step = -1;           // the step row that launched it; -1 if none
  std::int32_t device = 0;
  std::uint32_t kernel = 0;  // KernelStats index
  std::uint32_t seq = 0;     // arrival among the side list (HeldWindow)
  HeldType type = HeldType::Kernel;
  bool tensor_core = false;
  bool communication = false;
  std::int8_t phase = -1;      // given by the source (external correlation); -1 if not
  bool undecided = false;      // the name says neither Tensor Cores nor CUDA cores
  bool op_may_decide = false;  // ... and a 16- / 8-bit eligible op on this device would
};

class HeldWindow {
 public:
  // Throws std::bad_alloc only while the window grows past what it held before.
  void push(const HeldGpu& h) {
    Lane& l = lane(h.device);
    if (l.run.empty() || h.start >= l.run.back().start) {
      l.run.push_back(h);
    } else {
      l.side.push_back(h);
      l.side.back().seq = static_cast<std::uint32_t>(l.side.size() - 1);
    }
    ++size_;
  }

  // Room for n more in-order records of device, without the copy a doubling vector makes as it
  // fills (a whole trace is one batch: its window's copy was a tenth of the peak). Grows at least
  // twofold, so batch after batch stays linear. Throws std::bad_alloc.
  void reserve(std::int32_t device, std::size_t n) {
    std::vector<HeldGpu>& run = lane(device).run;
    if (run.size() + n > run.capacity()) run.reserve(std::max(run.size() + n, 2 * run.capacity()));
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // Device lookups' work so far (DeviceIndex::steps), for tests.
  std::int64_t lookup_steps() const noexcept { return index_.steps(); }

  // Empties the window; its memory is kept for the next one.
  void clear() noexcept {
    for (Lane& l : lanes_) {
      l.run.clear();
      l.side.clear();
    }
    size_ = 0;
  }

  // Every held record, in no particular order.
  template <typename F>
  void for_each(F&& f) {
    for (Lane& l : lanes_) {
      for (HeldGpu& h : l.run) f(h);
      for (HeldGpu& h : l.side) f(h);
    }
  }

  // Every held record by device, then start, ties in arrival order.
  template <typename F>
  void for_each_in_order(F&& f) {
    if (order_.size() != lanes_.size()) {  // lanes came since the last sweep: by device again
      order_.resize(lanes_.size());
      std::iota(order_.begin(), order_.end(), std::uint32_t{0});
      std::sort(order_.begin(), order_.end(), [&](std::uint32_t a, std::uint32_t b) {
        return lanes_[a].device < lanes_[b].device;
      });
    }
    for (const std::uint32_t at : order_) {
      Lane& l = lanes_[at];
      std::sort(l.side.begin(), l.side.end(), [](const HeldGpu& a, const HeldGpu& b) {
        return a.start != b.start ? a.start < b.start : a.seq < b.seq;
      });
      auto side = l.side.begin();
      for (HeldGpu& h : l.run) {
        for (; side != l.side.end() && side->start < h.start; ++side) f(*side);
        f(h);
      }
      for (; side != l.side.end(); ++side) f(*side);
    }
  }

 private:
  struct Lane {
    std::int32_t device = 0;
    std::vector<HeldGpu> run;   // in start order, as they arrived
    std::vector<HeldGpu> side;  // arrived out of order; sorted at the sweep
  };

  // Lanes are kept in arrival order, found through index_: kept sorted by device, a lane that
  // came before the others moved them all, and a trace naming devices in falling order made
  // that quadratic.
  Lane& lane(std::int32_t device) {
    if (last_ < lanes_.size() && lanes_[last_].device == device) return lanes_[last_];
    const auto device_of = [](const Lane& l) { return l.device; };
    std::size_t at = index_.find(lanes_, device, device_of);
    if (at == DeviceIndex::npos) {
      Lane& fresh = lanes_.emplace_back();
      fresh.device = device;
      try {
        index_.appended(lanes_, device_of);
      } catch (...) {
        lanes_.pop_back();
        throw;
      }
      at = lanes_.size() - 1;
    }
    last_ = at;
    return lanes_[at];
  }

  std::vector<Lane> lanes_;           // one per device seen, kept with its memory
  DeviceIndex index_;                 // of lanes_
  std::vector<std::uint32_t> order_;  // lanes_ by device, for the sweep
  std::size_t last_ = 0;              // the lane of the last push: records come in runs per device
  std::size_t size_ = 0;
};

}  // namespace fathom::aggregation
