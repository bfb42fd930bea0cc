#pragma once
// Attributes GPU activity to the fathom op and phase that launched it. CUPTI writes an external
// correlation record (correlation id -> the id fathom pushed) when the API call is made, and the
// GPU record with the same correlation id when the work completes, often in a later buffer. The
// table keeps the correlations of the last few deliveries only, so it grows with the launches of
// a few steps, never with the run.
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
  // Deliveries a correlation is kept for: a kernel completes well within a few steps of its
  // launch (the launch queue is bounded), and every step end delivers.
  static constexpr std::uint32_t kKeepDeliveries = 4;
  // Hard cap, for a loop that never reaches a step end.
  static constexpr std::size_t kMaxEntries = std::size_t{1} << 20;

  void add(const std::vector<ExternalCorrelation>& correlations);
  // Fills external_id and phase of every record whose correlation is known.
  void attribute(GpuActivity& batch) const;
  // Called after each delivery: forgets correlations older than kKeepDeliveries deliveries.
  void next_delivery();
  std::size_t size() const noexcept { return map_.size(); }

 private:
  struct Ids {
    std::uint64_t op = 0;
    std::uint64_t phase = 0;
    std::uint32_t delivery = 0;
  };
  const Ids* find(std::uint64_t correlation_id) const;
  void forget_older_than(std::uint32_t delivery);

  std::unordered_map<std::uint32_t, Ids> map_;
  std::uint32_t delivery_ = 0;
};

// The id fathom pushes for a phase, and back. 0 is "no phase".
std::uint64_t phase_correlation_id(Phase p) noexcept;
std::optional<Phase> phase_from_correlation_id(std::uint64_t id) noexcept;

}  // namespace fathom::cupti
