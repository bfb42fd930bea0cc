#pragma once
// NVTX ranges for ATen ops through at::RecordFunction, like torch.autograd.profiler.emit_nvtx:
// the op name, its sequence number (ties a backward op to its forward op) and, on request, the
// input shapes. Without shapes the name is a registered string (nvtx_name_cache.h) and the sequence
// number the range's int64 payload, so an op costs no allocation; with shapes the text is
// formatted per op ("aten::addmm, seq = 12 [[4, 8], [8, 16]]"). Owned registration: the callback is
// removed when this object dies. Without an NVTX tool attached nothing would receive the ranges, so
// no callback is registered at all (an op then costs what it costs without fathom).
#include <cstdint>

namespace fathom::detail {

class OpRanges {
 public:
  explicit OpRanges(bool record_shapes);
  ~OpRanges();
  bool active() const noexcept { return registered_; }
  OpRanges(const OpRanges&) = delete;
  OpRanges& operator=(const OpRanges&) = delete;

 private:
  std::uint64_t handle_ = 0;
  bool registered_ = false;
};

}  // namespace fathom::detail
