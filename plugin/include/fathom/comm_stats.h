#pragma once
// A rank's communication over one epoch: what the aggregator's ledger measures and the rank
// summary carries to rank 0.
#include <cstdint>
#include <string_view>

namespace fathom {

// Where a rank's communication time came from.
enum class CommSource : std::uint8_t {
  None,  // not measured: no collective tracked and no GPU communication kernels
  Host,  // collectives tracked by the training loop (launch to completion, host clock)
  Gpu,   // NCCL kernels in the rank's CUPTI records
};
std::string_view comm_source_name(CommSource s) noexcept;

// Communication of one rank over one epoch.
struct CommStats {
  CommSource source = CommSource::None;
  std::int64_t collectives = 0;
  std::int64_t bytes = 0;
  double busy_ms = 0;     // union of the collectives' intervals
  double exposed_ms = 0;  // the part the training loop waited for (not hidden behind compute)
};

}  // namespace fathom
