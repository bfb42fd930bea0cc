#include "analyze/gpu_throughput.h"

namespace fathom {

const GpuThroughput* find_gpu_throughput(std::string_view device_name, int compute_major,
                                         int compute_minor) noexcept {
  const GpuThroughput* first = nullptr;
  for (const GpuThroughput& g : kGpuThroughput) {
    if (g.compute_major != compute_major || g.compute_minor != compute_minor) continue;
    if (!g.match.empty() && device_name.find(g.match) != std::string_view::npos) return &g;
    if (!first) first = &g;
  }
  return first;
}

double low_precision_ratio(const GpuThroughput& g) noexcept {
  if (g.fp32_tflops <= 0) return 0;
  const double low =
      cuda_supports_bf16(g.compute_major) && g.bf16_tflops > 0 ? g.bf16_tflops : g.fp16_tflops;
  return low / g.fp32_tflops;
}

}  // namespace fathom
