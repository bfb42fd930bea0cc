#pragma once
// A stand-in for libcupti: activity buffers laid out with CUPTI's own record structs
// (cupti_activity.h), and a fake CUPTI whose every answer a test can choose. One fake per
// process, like CUPTI; FakeCupti::reset() between tests.
#include <cupti.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cupti_api.h"

namespace fathom::testing {

// Appends activity records the way CUPTI lays them out: one struct after another, 8-aligned.
class ActivityBufferBuilder {
 public:
  template <typename Record>
  Record& add(CUpti_ActivityKind kind) {
    static_assert(sizeof(Record) % 8 == 0, "CUPTI records are 8-byte aligned");
    const std::size_t at = bytes_.size();
    bytes_.resize(at + sizeof(Record), 0);
    offsets_.push_back(at);
    auto* r = reinterpret_cast<Record*>(bytes_.data() + at);
    std::memcpy(static_cast<void*>(r), &kind, sizeof(kind));  // every record starts with its kind
    return *r;
  }
  // Copies the records into an 8-aligned buffer of the given size; returns the bytes used.
  std::size_t copy_to(std::uint8_t* buffer, std::size_t size) const;
  std::size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }
  void clear() { bytes_.clear(), offsets_.clear(); }
  std::uint8_t* data() { return bytes_.data(); }

 private:
  std::vector<std::uint8_t> bytes_;
  std::vector<std::size_t> offsets_;
};

// The size CUPTI gives a record of this kind in fathom's fake buffers (the struct's size).
std::size_t fake_record_size(CUpti_ActivityKind kind);
// cuptiActivityGetNextRecord for buffers made by ActivityBufferBuilder.
CUptiResult fake_next_record(std::uint8_t* buffer, std::size_t valid_size, CUpti_Activity** record);

struct FakeCupti {
  static FakeCupti& get();
  void reset();

  // Answers a test can change.
  CUptiResult subscribe_result = CUPTI_SUCCESS;
  CUptiResult register_result = CUPTI_SUCCESS;
  std::map<CUpti_ActivityKind, CUptiResult> enable_results;  // missing: success
  CUptiResult flush_result = CUPTI_SUCCESS;
  CUptiResult next_record_error = CUPTI_SUCCESS;  // returned instead of the next record when set
  std::uint64_t timestamp = 1'000'000'000;        // what cuptiGetTimestamp says, unless live_clock
  // A CUPTI clock that runs: fathom's now_ns() + clock_shift (records stamped with now()).
  bool live_clock = false;
  std::int64_t clock_shift = 5'000'000'000;
  std::uint64_t now() const;
  std::size_t dropped_per_buffer = 0;  // what cuptiActivityGetNumDroppedRecords says

  // What fathom did to it.
  bool subscribed = false;
  int subscribe_calls = 0, unsubscribe_calls = 0, flush_calls = 0, forced_flush_calls = 0;
  std::set<CUpti_ActivityKind> enabled;
  std::vector<CUpti_ActivityKind> disabled;  // in order
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  std::map<CUpti_ExternalCorrelationKind, std::vector<std::uint64_t>> stacks;  // pushed ids
  int push_calls = 0, pop_calls = 0;
  std::size_t refused_buffers = 0;  // requests fathom answered with no buffer

  // Simulated work: what CUPTI records, delivered to fathom by the next flush.
  ActivityBufferBuilder pending;
  std::uint32_t next_correlation = 1;
  // A CUDA API call on the host: writes an external correlation record for each kind with a
  // pushed id (as CUPTI does), then the API record. Returns its correlation id.
  std::uint32_t api_call(CUpti_ActivityKind kind, std::uint32_t cbid, std::uint64_t start,
                         std::uint64_t end);
  CUpti_ActivityKernel10& kernel(const char* name, std::uint32_t correlation, std::uint64_t start,
                                 std::uint64_t end);
  CUpti_ActivityMemcpy6& memcpy(std::uint8_t copy_kind, std::uint8_t src, std::uint8_t dst,
                                std::uint64_t bytes, std::uint32_t correlation, std::uint64_t start,
                                std::uint64_t end);
  // Delivers pending records the way CUPTI does: one buffer from fathom's request callback,
  // back through the completion callback.
  void deliver_pending();
};

// An Api whose every function is FakeCupti's.
cupti::Api fake_api();

}  // namespace fathom::testing
