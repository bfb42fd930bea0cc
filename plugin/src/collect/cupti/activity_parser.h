#pragma once
// Turns one completed CUPTI activity buffer into fathom's plain records (gpu_records.h).
// Runs on the training thread at a flush, never inside a CUPTI callback. Timestamps stay in
// CUPTI's unit (ClockAlignment moves them later, once the unit is known). External correlation
// records are returned beside the activity: the GPU records they belong to may arrive in another
// buffer, so attribution happens later (CorrelationTable).
#include <fathom/gpu_records.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collect/cupti/cupti_api.h"

namespace fathom::cupti {

// The id fathom had pushed while the CUDA API call `correlation_id` ran.
struct ExternalCorrelation {
  std::uint32_t correlation_id = 0;
  CUpti_ExternalCorrelationKind kind = CUPTI_EXTERNAL_CORRELATION_KIND_INVALID;
  std::uint64_t external_id = 0;
};

// Records CUPTI delivered that carry no usable measurement, by why.
struct LostRecords {
  std::int64_t incomplete = 0;  // a forced flush returned it before it was written (INVALID_KIND)
  std::int64_t in_flight = 0;   // work still running at a forced flush: start, no end
  std::int64_t untimed = 0;     // both timestamps 0: CUPTI had no room for them on the device
  std::int64_t total() const noexcept { return incomplete + in_flight + untimed; }
};

struct ParsedBuffer {
  GpuActivity activity;
  std::vector<ExternalCorrelation> correlations;
  std::int64_t records = 0;  // records read, of every kind
  std::int64_t skipped = 0;  // records of kinds fathom does not read (another client's kinds)
  LostRecords lost;
  // A record iteration error that is neither the end of the buffer nor an incomplete record:
  // the rest of the buffer was lost, and the collector treats it as a CUPTI failure.
  CUptiResult error = CUPTI_SUCCESS;
};

// Appends the records of buffer[0, valid_size) to out. Never throws.
void parse_buffer(const Api& api, std::uint8_t* buffer, std::size_t valid_size,
                  ParsedBuffer& out) noexcept;

// CUPTI's enums in fathom's terms.
MemcpyKind memcpy_kind(std::uint8_t cupti_copy_kind) noexcept;
MemoryKind memory_kind(std::uint8_t cupti_memory_kind) noexcept;
// The synchronization a traced runtime or driver call is, by name; nullopt for other calls.
std::optional<SyncKind> sync_kind_of_call(std::string_view name) noexcept;
// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": the names PyTorch profiler traces use.
std::string api_display_name(const char* cupti_name);

}  // namespace fathom::cupti
