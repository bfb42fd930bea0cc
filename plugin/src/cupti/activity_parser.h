#pragma once
// Turns one completed CUPTI activity buffer into fathom's plain records (gpu_records.h).
// External correlation records are returned beside the activity: the GPU records they belong to
// may arrive in another buffer, so attribution happens later (CorrelationTable).
#include <fathom/gpu_records.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cupti_api.h"

namespace fathom::cupti {

// The id fathom had pushed (of one kind) while the CUDA API call `correlation_id` ran.
struct ExternalCorrelation {
  std::uint32_t correlation_id = 0;
  CUpti_ExternalCorrelationKind kind = CUPTI_EXTERNAL_CORRELATION_KIND_INVALID;
  std::uint64_t external_id = 0;
};

struct ParsedBuffer {
  GpuActivity activity;
  std::vector<ExternalCorrelation> correlations;
  std::int64_t records = 0;  // records read, of every kind
  std::int64_t skipped = 0;  // records of kinds fathom does not read
  // A record iteration error other than "end of buffer": the rest of the buffer was lost.
  CUptiResult error = CUPTI_SUCCESS;
};

class ActivityParser {
 public:
  explicit ActivityParser(const Api& api) : api_(api) {}

  // Appends the records of buffer[0, valid_size) to out. clock_offset_ns moves CUPTI's
  // timestamps onto fathom's clock (now_ns). Thread-safe; never throws.
  void parse(std::uint8_t* buffer, std::size_t valid_size, std::int64_t clock_offset_ns,
             ParsedBuffer& out) noexcept;

 private:
  const std::string& api_name(CUpti_CallbackDomain domain, std::uint32_t cbid);

  const Api& api_;
  std::mutex mutex_;  // CUPTI may complete buffers on its own thread and on a flushing one
  std::unordered_map<std::uint64_t, std::string> names_;
};

// CUPTI's enums in fathom's terms.
MemcpyKind memcpy_kind(std::uint8_t cupti_copy_kind) noexcept;
MemoryKind memory_kind(std::uint8_t cupti_memory_kind) noexcept;
SyncKind sync_kind(CUpti_ActivitySynchronizationType type) noexcept;
// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": the names PyTorch profiler traces use.
std::string api_display_name(const char* cupti_name);

}  // namespace fathom::cupti
