#pragma once
// Tensor Core use: the share of compute-kernel time spent in Tensor Core kernels (overall and per
// phase), how each kernel's unit was decided (by its name, by the op that launched it, or not at
// all: unknown is its own class, never counted as CUDA cores), which kernel families the time went
// to, and the Tensor-Core-eligible ATen ops (GEMMs, convolutions, attention) whose kernels all ran
// on CUDA cores, or whose shapes keep them off Tensor Cores.
#include <fathom/gpu_analysis.h>

#include <string>
#include <string_view>

namespace fathom {

struct GpuAggregate;

TensorCoreResult analyze_tensor_cores(const GpuAggregate& a);

// What the report says when the unknown share is notable: why those kernels are undecided and what
// would decide them (FATHOM_RECORD_SHAPES=on when the ops' input types were not recorded); empty
// otherwise. One sentence for the terminal, the HTML page and GpuSummary::not_measured.
std::string undecided_kernels_note(const TensorCoreResult& r);

}  // namespace fathom
