// A tool author's program against fathom's torch-free core alone: replays GPU records through the
// analyses and prints what they found. Built with no LibTorch anywhere on the machine's paths.
#include <fathom/fathom_core.h>
#include <fathom/replay.h>

#include <iostream>

int main() {
  fathom::GpuActivity activity;
  fathom::KernelRecord k;
  k.name = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1";
  k.start_ns = 1'000;
  k.end_ns = 51'000;
  activity.kernels.push_back(k);
  fathom::GpuSummaryOptions options;
  options.source = "core consumer";
  const fathom::GpuSummary summary = fathom::analyze_activity(activity, options);
  std::cout << "core consumer: fathom " << fathom::kVersion << "\n"
            << fathom::format_gpu_summary_text(summary);
  // One 50 us Tensor Core GEMM: all of the compute time is on Tensor Cores.
  return summary.tensor_cores.kernel_count == 1 && summary.tensor_cores.share == 1.0 ? 0 : 1;
}
