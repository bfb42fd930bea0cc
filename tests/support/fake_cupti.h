#pragma once
// Activity buffers laid out with CUPTI's own record structs (cupti_activity.h), and the few CUPTI
// functions the parser's and the checked path's unit tests need. One fake per process;
// FakeCupti::reset() between tests.
#include <cupti.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "collect/cupti/cupti_api.h"

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

// The few answers the unit tests of the parser and the checked path choose. The collector's
// tests use the CUPTI stand-in instead (tests/support/cupti_standin), which keeps CUPTI's rules.
struct FakeCupti {
  static FakeCupti& get();
  void reset();

  CUptiResult next_record_error = CUPTI_SUCCESS;  // returned instead of the next record when set
  std::map<CUpti_ActivityKind, CUptiResult> enable_results;  // missing: success
  std::set<CUpti_ActivityKind> enabled;
};

// An Api with FakeCupti's result strings, version, callback names, enable and record walk.
cupti::Api fake_api();

}  // namespace fathom::testing
