#pragma once
// NVTX ranges for ATen ops through at::RecordFunction, like torch.autograd.profiler.emit_nvtx:
// the op name, its sequence number (ties a backward op to its forward op) and, on request, the
// input shapes. Owned registration: the callback is removed when this object dies.
#include <cstdint>

namespace fathom::detail {

class OpRanges {
 public:
  explicit OpRanges(bool record_shapes);
  ~OpRanges();
  OpRanges(const OpRanges&) = delete;
  OpRanges& operator=(const OpRanges&) = delete;

 private:
  std::uint64_t handle_ = 0;
};

}  // namespace fathom::detail
