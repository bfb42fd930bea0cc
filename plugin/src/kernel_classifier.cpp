#include <fathom/kernel_classifier.h>

#include <algorithm>
#include <cctype>

namespace fathom {
namespace {

using P = Precision;

// Order matters: the first row that matches decides. Communication first, then the look-alikes
// that run on CUDA cores, then the Tensor Core families from Volta to Blackwell, then the CUDA
// core families that are only worth naming.
constexpr KernelRule kRules[] = {
    // NCCL collectives and point-to-point: ncclKernel_* (NCCL < 2.19), ncclDevKernel_* (newer).
    {"nccl",
     {"nccl"},
     {},
     false,
     true,
     P::Unknown,
     "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"},

    // --- look-alikes: names of the Tensor Core families that run on CUDA cores ---
    // cuBLAS/cuDNN xmma kernels doing plain FP32 say so with an _ffma_ (fused multiply-add) tile.
    {"ffma",
     {"ffma"},
     {},
     false,
     false,
     P::FP32,
     "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_"
     "alignc4_execute_kernel_trans_a"},
    {"hfma",
     {"hfma"},
     {},
     false,
     false,
     P::FP16,
     "sm80_xmma_gemm_f16f16_f16f16_f16_nn_n_tilesize64x64x8_stage3_warpsize2x2x1_hfma2_execute_"
     "kernel"},
    // Truncated xmma names lose the _ffma_ suffix; f32 inputs with f32 math are the same trap.
    {"xmma_fp32",
     {"xmma", "f32f32_f32f32_f32"},
     {},
     false,
     false,
     P::FP32,
     "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3"},
    {"sgemm", {"sgemm"}, {}, false, false, P::FP32, "volta_sgemm_64x64_nt"},
    {"scudnn", {"scudnn"}, {}, false, false, P::FP32, "volta_scudnn_128x64_relu_interior_nn_v1"},
    {"simt",
     {"simt"},
     {},
     false,
     false,
     P::Unknown,
     "void cutlass::Kernel<cutlass_75_simt_hgemm_256x128_8x2_nn_align1>"
     "(cutlass_75_simt_hgemm_256x128_8x2_nn_align1::Params)"},
    {"dgemm", {"dgemm"}, {}, false, false, P::FP64, "volta_dgemm_64x64_nn"},

    // --- Tensor Cores ---
    // FP64 DMMA (Ampere+): d884 would otherwise read as a Volta 884 kernel.
    {"dmma",
     {},
     {"dmma", "d884"},
     true,
     false,
     P::FP64,
     "void cutlass::Kernel<cutlass_tensorop_d884gemm_128x128_16x3_nn_align1>"
     "(cutlass_tensorop_d884gemm_128x128_16x3_nn_align1::Params)"},
    {"imma",
     {},
     {"imma", "i8816", "i16832"},
     true,
     false,
     P::INT8,
     "void cutlass::Kernel<cutlass_tensorop_i8816gemm_s8_128x128_64x2_tn_align16>"
     "(cutlass_tensorop_i8816gemm_s8_128x128_64x2_tn_align16::Params)"},
    // Volta's HMMA instruction and the WMMA API over it.
    {"hmma", {"hmma"}, {}, true, false, P::Unknown, "volta_fp16_hmma_gemm_128x128_ldg8_nn"},
    {"wmma",
     {"wmma"},
     {},
     true,
     false,
     P::Unknown,
     "void cutlass::Kernel<cutlass_75_wmma_tensorop_h161616gemm_16x16_32x2_nn_align8>"
     "(cutlass_75_wmma_tensorop_h161616gemm_16x16_32x2_nn_align8::Params)"},
    // Volta m8n8k4 (884), FP16 only.
    {"884",
     {},
     {"s884", "h884", "884gemm", "884cudnn"},
     true,
     false,
     P::FP16,
     "volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn"},
    // Turing m16n8k8 (1688): FP16 on Turing, also TF32/BF16 on Ampere.
    {"1688",
     {},
     {"s1688", "h1688", "1688gemm", "1688cudnn"},
     true,
     false,
     P::Unknown,
     "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn"},
    // Ampere m16n8k16 (16816) and m16n8k32 (16832).
    {"16816",
     {},
     {"16816", "16832"},
     true,
     false,
     P::Unknown,
     "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"},
    // Hopper warpgroup MMA (cuBLAS, cuDNN, CUTLASS 3 and FlashAttention 3 all say gmma or wgmma).
    {"gmma",
     {},
     {"gmma", "wgmma"},
     true,
     false,
     P::Unknown,
     "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>, "
     "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4>"
     ","
     " cutlass::bfloat16_t, float> > >(cutlass::gemm::kernel::GemmUniversal::Params)"},
    // Blackwell's tcgen05 / UMMA.
    {"tcgen05",
     {},
     {"tcgen05", "umma"},
     true,
     false,
     P::Unknown,
     "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::collective::"
     "CollectiveMma<cutlass::gemm::MainloopSm100TmaUmmaWarpSpecialized<4>, cutlass::half_t> > >"},
    // cuBLAS and cuDNN GEMM / implicit-GEMM convolutions, sm75 to sm100: xmma with a type string.
    {"xmma",
     {"xmma"},
     {},
     true,
     false,
     P::Unknown,
     "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_"
     "tensor16x8x16_execute_kernel_trans_a"},
    // cuBLAS's GEMMs on Hopper and Blackwell (warpgroup kernels); hsh = fp16, tst = bf16.
    {"nvjet", {"nvjet"}, {}, true, false, P::Unknown, "nvjet_hsh_192x192_64x3_2x1_v_bz_coopB_NTN"},
    {"tensorop",
     {"tensorop"},
     {},
     true,
     false,
     P::Unknown,
     "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8_"
     "warpspecialized_cooperative_epi_tma"},
    // FlashAttention and the memory-efficient (CUTLASS) attention kernels use mma.sync.
    {"flash_attention",
     {},
     {"flash_fwd", "flash_bwd", "flashattn", "fmha"},
     true,
     false,
     P::Unknown,
     "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 64, 64, 4, "
     "false, false, cutlass::bfloat16_t>, false, false, false, false, true, true, false, false>"
     "(pytorch_flash::Flash_fwd_params)"},

    // --- CUDA cores, named so the report can say what the time went to ---
    {"cgemm", {"cgemm"}, {}, false, false, P::FP32, "ampere_gcgemm_64x64_nt"},
    {"gemv",
     {"gemv"},
     {},
     false,
     false,
     P::Unknown,
     "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>"},
    {"cudnn_cuda_cores",
     {},
     {"dgrad_engine", "wgrad_alg", "winograd", "fft2d", "convolve"},
     false,
     false,
     P::Unknown,
     "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float "
     "const*, int, float const*, int, float*, kernel_grad_params, unsigned long long, int, "
     "unsigned long long, int, float, int, int, int)"},
};

char lower(char c) noexcept {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// Case-insensitive substring test; token is lowercase. No allocation: this runs in vendor
// callbacks.
bool contains(std::string_view name, std::string_view token) noexcept {
  if (token.empty()) return true;
  auto it = std::search(name.begin(), name.end(), token.begin(), token.end(),
                        [](char a, char b) noexcept { return lower(a) == b; });
  return it != name.end();
}

bool matches(const KernelRule& r, std::string_view name) noexcept {
  for (std::string_view t : r.all_of)
    if (!t.empty() && !contains(name, t)) return false;
  bool any_given = false;
  for (std::string_view t : r.any_of) {
    if (t.empty()) continue;
    any_given = true;
    if (contains(name, t)) return true;
  }
  return !any_given;
}

// cuBLAS nvjet names carry the types as letters after the prefix: nvjet_[smNN_]hsh_..., tst_...
Precision nvjet_precision(std::string_view name) noexcept {
  std::size_t at = 0;
  for (std::size_t i = 0; i + 6 <= name.size(); ++i) {
    if (contains(name.substr(i, 6), "nvjet_")) {
      at = i + 6;
      break;
    }
  }
  if (at == 0) return P::Unknown;
  if (at + 2 < name.size() && lower(name[at]) == 's' && lower(name[at + 1]) == 'm') {
    std::size_t u = name.find('_', at);
    if (u == std::string_view::npos) return P::Unknown;
    at = u + 1;
  }
  if (at >= name.size()) return P::Unknown;
  switch (lower(name[at])) {
    case 'h':
      return P::FP16;
    case 't':
      return P::BF16;
    case 'q':
    case 'e':
      return P::FP8;
    default:
      return P::Unknown;
  }
}

}  // namespace

std::string_view precision_name(Precision p) noexcept {
  switch (p) {
    case P::FP64:
      return "fp64";
    case P::FP32:
      return "fp32";
    case P::TF32:
      return "tf32";
    case P::FP16:
      return "fp16";
    case P::BF16:
      return "bf16";
    case P::FP8:
      return "fp8";
    case P::FP4:
      return "fp4";
    case P::INT8:
      return "int8";
    case P::Unknown:
      break;
  }
  return "unknown";
}

std::span<const KernelRule> kernel_rules() noexcept { return kRules; }

Precision precision_from_name(std::string_view name) noexcept {
  // Narrow and unusual types first: a bf16 name also contains "f16", a tf32 one "f32".
  struct Token {
    std::string_view text;
    Precision precision;
  };
  static constexpr Token kTokens[] = {
      {"e2m1", P::FP4},   {"nvfp4", P::FP4},  {"e4m3", P::FP8},      {"e5m2", P::FP8},
      {"fp8", P::FP8},    {"bf16", P::BF16},  {"bfloat16", P::BF16}, {"tf32", P::TF32},
      {"f16", P::FP16},   {"fp16", P::FP16},  {"half", P::FP16},     {"h884", P::FP16},
      {"h1688", P::FP16}, {"int8", P::INT8},  {"s8s8", P::INT8},     {"i8i8", P::INT8},
      {"f64", P::FP64},   {"fp64", P::FP64},  {"double", P::FP64},   {"f32", P::FP32},
      {"fp32", P::FP32},  {"float", P::FP32},
  };
  for (const Token& t : kTokens)
    if (contains(name, t.text)) return t.precision;
  return P::Unknown;
}

KernelClass classify_kernel(std::string_view name) noexcept {
  for (const KernelRule& r : kRules) {
    if (!matches(r, name)) continue;
    KernelClass c{r.tensor_core, r.communication, r.family, r.precision};
    if (c.precision == P::Unknown && !c.communication) {
      c.precision = r.family == "nvjet" ? nvjet_precision(name) : precision_from_name(name);
    }
    return c;
  }
  return KernelClass{false, false, "other", precision_from_name(name)};
}

}  // namespace fathom
