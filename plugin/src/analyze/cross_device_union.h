#pragma once
// The whole-export figures of a multi-GPU export: the time any device (or any process) spent
// copying, communicating or blocked in a synchronization, as the union of those intervals across
// devices, never their sum. Summed device time divided by one window reads "busy 194% of the
// window" on two devices; the union cannot pass 100%, and neither can the advisor's gains made
// from it.
#include <fathom/gpu_records.h>
#include <fathom/gpu_summary.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fathom {

class CrossDeviceUnion {
 public:
  // The records of one batch; any order (the Nsight reader's are in start order, merged cheaply).
  void add(const GpuActivity& batch);
  // Replaces whole's summed copy busy time, communication share and host synchronization time
  // with the unions clipped to [window_begin_ns, window_end_ns).
  void apply(GpuSummary& whole, std::int64_t window_begin_ns, std::int64_t window_end_ns) const;

  // A union of intervals: the merged segments, sorted.
  class Spans {
   public:
    void add(std::int64_t start, std::int64_t end);
    std::int64_t within(std::int64_t begin, std::int64_t end) const;  // union length inside

   private:
    void normalize() const;
    mutable std::vector<std::pair<std::int64_t, std::int64_t>> merged_;
    mutable bool sorted_ = true;
  };

 private:
  bool communication(const std::string& name);

  Spans copies_, communication_, sync_records_, sync_calls_;
  std::unordered_map<std::string, bool> communication_names_;  // the classifier's answer, cached
};

}  // namespace fathom
