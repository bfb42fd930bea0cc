#pragma once
// Tensor Core use: the share of compute-kernel time spent in Tensor Core kernels (overall and per
// phase), which kernel families the time went to, and the Tensor-Core-eligible ATen ops (GEMMs,
// convolutions) whose kernels all ran on CUDA cores, or whose shapes keep them off Tensor Cores.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fathom {

struct GpuAggregate;

struct PhaseTensorCores {
  std::string phase;           // phase_name(), or "unattributed"
  std::int64_t kernel_ns = 0;  // compute kernels (communication left out)
  std::int64_t tensor_core_ns = 0;
  std::optional<double> share;  // tensor_core_ns / kernel_ns; null without kernel time
};

struct KernelFamilyTime {
  std::string family;  // kernel_classifier's row id
  bool tensor_core = false;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
};

struct TopKernel {
  std::string name;
  std::string family;
  bool tensor_core = false;
  bool communication = false;
  std::string precision;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
};

struct EligibleOp {
  std::string op;
  std::string shapes;
  std::string dtypes;
  std::string misaligned;  // dims that are not multiples of 8, "" if none
  std::int64_t instances = 0;
  std::int64_t only_cuda_cores = 0;  // instances whose kernels all ran on CUDA cores
  std::int64_t tensor_core_ns = 0;
  std::int64_t cuda_core_ns = 0;
};

struct TensorCoreResult {
  std::int64_t kernel_count = 0;  // compute kernels
  std::int64_t kernel_ns = 0;
  std::int64_t tensor_core_count = 0;
  std::int64_t tensor_core_ns = 0;
  std::optional<double> share;             // of compute-kernel time; null without any
  std::vector<PhaseTensorCores> phases;    // phases with kernel time, then "unattributed"
  std::vector<KernelFamilyTime> families;  // by time, most first
  std::vector<TopKernel> top_kernels;      // by time, at most kTopKernels

  // Eligible ops, when the source recorded ATen ops (a Kineto trace, fathom's op hooks).
  bool ops_recorded = false;
  std::int64_t eligible_instances = 0;
  std::int64_t eligible_with_kernels = 0;
  std::int64_t eligible_only_cuda_cores = 0;
  std::int64_t eligible_cuda_core_ns = 0;  // kernel time of eligible ops on CUDA cores
  std::vector<EligibleOp> on_cuda_cores;   // by CUDA core time, most first, at most kTopOps
  std::vector<EligibleOp> misaligned;  // shapes not multiples of 8, by instances, at most kTopOps
};

inline constexpr std::size_t kTopKernels = 10;
inline constexpr std::size_t kTopOps = 10;

TensorCoreResult analyze_tensor_cores(const GpuAggregate& a);

}  // namespace fathom
