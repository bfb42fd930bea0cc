#pragma once
// What fathom records of one tensor.to(device): direction, bytes, pinned or pageable host side,
// blocking or not. Shared by StepScope::to_device and the Python binding's step.to_device.
#include <ATen/core/Tensor.h>
#include <fathom/records.h>

#include <cstdint>
#include <optional>

namespace fathom::detail {

// in: the tensor given to .to(); out: what .to() returned. nullopt when .to() returned `in`
// itself, i.e. nothing was copied (asking the tensor, because "cuda" and "cuda:0" compare
// unequal as devices).
std::optional<CopyRecord> copy_record_of(const at::Tensor& in, const at::Tensor& out,
                                         bool non_blocking, std::int64_t begin_ns,
                                         std::int64_t end_ns, std::int64_t step);

}  // namespace fathom::detail
