#pragma once
// Peak dense throughput of common data-center GPUs by compute capability, from NVIDIA's data
// sheets: what mixed precision can gain at most when work moves from FP32 to 16-bit Tensor Cores.
// Real GEMMs and convolutions reach a smaller share of either peak, so ratios of peaks are upper
// bounds, and the report says so.
#include <optional>
#include <string_view>

namespace fathom {

struct GpuThroughput {
  std::string_view name;  // the card the figures are from
  int compute_major = 0;
  int compute_minor = 0;
  std::string_view match;  // substring of the device name that picks this row ("" = none)
  double fp32_tflops = 0;  // CUDA cores
  double tf32_tflops = 0;  // Tensor Cores; 0 where there is no TF32
  double fp16_tflops = 0;  // Tensor Cores, FP32 accumulate
  double bf16_tflops = 0;  // Tensor Cores; 0 where there is no bf16
};

inline constexpr GpuThroughput kGpuThroughput[] = {
    {"V100 SXM2", 7, 0, "V100", 15.7, 0, 125, 0},
    {"T4", 7, 5, "T4", 8.1, 0, 65, 0},
    {"A100 SXM", 8, 0, "A100", 19.5, 156, 312, 312},
    {"A10", 8, 6, "A10", 31.2, 62.5, 125, 125},
    {"L40S", 8, 9, "L40S", 91.6, 183, 362, 362},
    {"L4", 8, 9, "L4", 30.3, 60, 121, 121},
    {"H100 SXM / H200", 9, 0, "", 67, 495, 989, 989},
    {"H100 PCIe", 9, 0, "PCIe", 51, 378, 756, 756},
    {"B200", 10, 0, "B200", 75, 1100, 2250, 2250},
};

// The row for a device: the first of its compute capability whose match is in device_name; else
// the first of its compute capability (rows are ordered so that this is the likeliest card);
// else nullptr.
const GpuThroughput* find_gpu_throughput(std::string_view device_name, int compute_major,
                                         int compute_minor) noexcept;

// The 16-bit dtype autocast should use: bf16 from compute capability 8.0 (Ampere) on, fp16 before.
// (CPU autocast uses bf16.)
constexpr bool cuda_supports_bf16(int compute_major) noexcept { return compute_major >= 8; }

// Peak 16-bit Tensor Core throughput over FP32 CUDA-core throughput for the dtype autocast would
// use on this row: the most a GEMM moved off FP32 can speed up.
double low_precision_ratio(const GpuThroughput& g) noexcept;

// Amdahl's law: the step's speed-up when a share of it runs ratio times faster.
constexpr double speedup_bound(double share, double ratio) noexcept {
  return ratio > 0 ? 1.0 / ((1.0 - share) + share / ratio) : 1.0;
}

}  // namespace fathom
