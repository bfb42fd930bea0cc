#pragma once
// Ties GPU work to the ATen op that launched it while CUPTI collects: around every
// Tensor-Core-eligible op (mm, addmm, bmm, linear, convolution and their backward) it pushes a
// fresh external id to CUPTI and hands the op (name, sequence number, times and, with
// record_shapes, input shapes and types) to the collector under that id. Other ops cost one name
// check. Owned registration: the callback is removed when this object dies.
#include <cstdint>

#include "collect/cupti/cupti_collector.h"

namespace fathom::detail {

class OpCorrelation {
 public:
  OpCorrelation(CuptiCollector& collector, bool record_shapes);
  ~OpCorrelation();
  OpCorrelation(const OpCorrelation&) = delete;
  OpCorrelation& operator=(const OpCorrelation&) = delete;

 private:
  std::uint64_t handle_ = 0;
};

}  // namespace fathom::detail
