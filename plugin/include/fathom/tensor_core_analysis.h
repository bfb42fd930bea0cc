#pragma once
// Tensor Core use: the share of compute-kernel time spent in Tensor Core kernels (overall and per
// phase), how each kernel's unit was decided (by its name, by the op that launched it, or not at
// all: unknown is its own class, never counted as CUDA cores), which kernel families the time went
// to, and the Tensor-Core-eligible ATen ops (GEMMs, convolutions, attention) whose kernels all ran
// on CUDA cores, or whose shapes keep them off Tensor Cores.
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
  std::int64_t unknown_ns = 0;  // kernels neither the name nor the op decided
};

struct KernelFamilyTime {
  std::string family;  // kernel_classifier's row id
  bool tensor_core = false;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  std::string decision = "name";          // "name", or "unknown" (no row names the kernels)
  std::int64_t tensor_core_by_op_ns = 0;  // of an unknown family, the launches an op decided
};

struct TopKernel {
  std::string name;
  std::string family;
  bool tensor_core = false;
  bool communication = false;
  std::string precision;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  std::string decision = "name";  // "name" or "unknown", as for families
  std::int64_t tensor_core_by_op_ns = 0;
};

// Kernel count and time of one way of deciding.
struct DecidedTime {
  std::int64_t count = 0;
  std::int64_t ns = 0;
};

// Compute kernels by how their unit was decided; the four add up to kernel_count / kernel_ns.
struct TensorCoreDecisions {
  DecidedTime tensor_cores_by_name;
  DecidedTime cuda_cores_by_name;
  DecidedTime tensor_cores_by_op;  // undecided names, launched by a 16- / 8-bit eligible op, sm_80+
  DecidedTime unknown;
  // Of unknown: fused-attention kernels whose architecture neither the name nor the source gave.
  DecidedTime unknown_without_capability;
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
  std::int64_t tensor_core_count = 0;  // by name and by op
  std::int64_t tensor_core_ns = 0;
  std::optional<double> share;  // of compute-kernel time; null without any; a lower bound when
                                // some of it is unknown
  TensorCoreDecisions decisions;
  std::optional<double> unknown_share;     // decisions.unknown.ns / kernel_ns
  bool op_dtypes_recorded = false;         // eligible ops carried input types: ops could decide
  std::vector<PhaseTensorCores> phases;    // phases with kernel time, then "unattributed"
  std::vector<KernelFamilyTime> families;  // by time, most first
  std::vector<TopKernel> top_kernels;      // by time, at most kTopKernels

  // Eligible ops, when the source recorded ATen ops (a Kineto trace, fathom's op hooks).
  bool ops_recorded = false;
  std::int64_t eligible_instances = 0;
  std::int64_t eligible_with_kernels = 0;
  std::int64_t eligible_only_cuda_cores = 0;
  std::int64_t eligible_cuda_core_ns = 0;  // kernel time of eligible ops on CUDA cores
  std::int64_t eligible_unknown_ns = 0;    // ... in kernels neither name nor op decided
  std::vector<EligibleOp> on_cuda_cores;   // by CUDA core time, most first, at most kTopOps
  std::vector<EligibleOp> misaligned;  // shapes not multiples of 8, by instances, at most kTopOps
};

inline constexpr std::size_t kTopKernels = 10;
inline constexpr std::size_t kTopOps = 10;
// Above this share of compute-kernel time in unknown kernels the report says how to decide them
// (docs/thresholds.md).
inline constexpr double kUnknownShareNotable = 0.10;

TensorCoreResult analyze_tensor_cores(const GpuAggregate& a);

// What the report says when the unknown share is notable: why those kernels are undecided and what
// would decide them (FATHOM_RECORD_SHAPES=on when the ops' input types were not recorded); empty
// otherwise. One sentence for the terminal, the HTML page and GpuSummary::not_measured.
std::string undecided_kernels_note(const TensorCoreResult& r);

}  // namespace fathom
