#pragma once
// Attributes GPU activity to the fathom op and phase that launched it. CUPTI writes an external
// correlation record (correlation id -> the id fathom pushed) when the API call is made, and the
// GPU record with the same correlation id when the work completes, often in a later buffer: a
// non-forced flush returns a stream's buffer only once it is full, so in a loop without a sync
// per step a kernel comes back thousands of launches (many deliveries) after its correlation.
// So a correlation is kept by what is still owed, not by deliveries: until its GPU record has
// arrived (then a few deliveries more, for a graph launch's other kernels), or until the epoch's
// forced flush has proven that it never will (settle()). Memory is bounded by kMaxEntries; when
// the bound cuts correlations still owed, cut() counts them and the collector says so.
#include <fathom/gpu_records.h>
#include <fathom/phase.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "collect/cupti/activity_parser.h"

namespace fathom::cupti {

// The one CUPTI external correlation kind fathom pushes. Kineto pushes CUSTOM0 (its ops) and
// CUSTOM1 (user annotations): an id of fathom's on those stacks would take the place of the
// profiler's for the calls made under it. Phases and ops share fathom's stack (the innermost id
// tags a call; an op's phase is found from the host timeline), told apart by kOpIdBit.
inline constexpr CUpti_ExternalCorrelationKind kFathomCorrelation =
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
inline constexpr std::uint64_t kOpIdBit = std::uint64_t{1} << 63;

class CorrelationTable {
 public:
  // Deliveries a correlation is kept for once its GPU record arrived: a graph launch's kernels
  // share its correlation id and may come back in several buffers.
  static constexpr std::uint32_t kKeepDeliveries = 4;
  // Hard cap (~50 MiB), for a loop that never reaches an epoch's end.
  static constexpr std::size_t kMaxEntries = std::size_t{1} << 20;

  void add(const std::vector<ExternalCorrelation>& correlations);
  // Fills external_id and phase of every record whose correlation is known; a GPU record (or a
  // CUDA call that launches no GPU work) pays its correlation.
  void attribute(GpuActivity& batch);
  // Called after each delivery: forgets paid correlations older than kKeepDeliveries deliveries.
  void next_delivery();
  // Called after the delivery of a forced flush of a synchronized device: everything launched
  // has come back, so what is still owed never will be.
  void settle();
  std::size_t size() const noexcept { return map_.size(); }
  // Correlations still owed that the memory bound forgot: their GPU work is unattributed.
  std::int64_t cut() const noexcept { return cut_; }

 private:
  static constexpr std::uint32_t kOwed = ~std::uint32_t{0};
  struct Ids {
    std::uint64_t op = 0;
    std::uint64_t phase = 0;
    std::uint32_t delivery = 0;  // when it was added
    std::uint32_t paid = kOwed;  // the delivery its GPU record arrived in; kOwed until then
  };
  Ids* find(std::uint64_t correlation_id);
  void make_room();

  std::unordered_map<std::uint32_t, Ids> map_;
  std::uint32_t delivery_ = 0;
  std::int64_t cut_ = 0;
};

// The id fathom pushes for a phase, and back. 0 is "no phase".
std::uint64_t phase_correlation_id(Phase p) noexcept;
std::optional<Phase> phase_from_correlation_id(std::uint64_t id) noexcept;

}  // namespace fathom::cupti
