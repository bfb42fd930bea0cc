#include "aggregate/kernel_classifier.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "base/kernel_name.h"

namespace fathom {
namespace {

using P = Precision;
using U = RuleUnit;

// Order matters: the first row that matches decides. Communication first, then the look-alikes
// that run on CUDA cores, then the Tensor Core families from Volta to Blackwell, then the CUDA-core
// families and helpers. Names in the comments say where a name was read (flash-attention, PyTorch,
// vLLM, TensorRT-LLM, TransformerEngine, DeepEP, NVSHMEM sources); the examples are the test's.
// clang-format off
constexpr KernelRule kRules[] = {
    // --- communication ---
    // NCCL collectives and point-to-point: ncclKernel_* (NCCL < 2.19), ncclDevKernel_* (newer).
    {"nccl", {"nccl"}, {}, U::Communication, P::Unknown,
     "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"},
    // torch symmetric memory (c10d/symm_mem: CUDASymmetricMemoryOps.cu, nvshmem_extension.cu):
    // multimem_* (NVLS multicast), one_shot_ / two_shot_all_reduce_kernel, allToAllV,
    // exchangeSplitAndOffset.
    {"symmetric_memory", {}, {"multimem_", "one_shot_all_reduce", "two_shot_all_reduce",
                              "alltoallv", "exchangesplitandoffset"},
     U::Communication, P::Unknown,
     "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, "
     "unsigned long, unsigned int**, unsigned long, unsigned long)"},
    // NVSHMEM's own kernels: nvshmemi_proxy_rma_entrypoint, nvshmemi_reduce_kernel, ...
    {"nvshmem", {"nvshmem"}, {}, U::Communication, P::Unknown,
     "void nvshmemi_proxy_rma_entrypoint<(nvshmemi_op_t)0, 1>(void*, void*, rma_bytesdesc_t, int)"},
    // TransformerEngine's comm-GEMM overlap: userbuffers_*_sum_inplace_gpu_*, kuserbuffers_*.
    {"userbuffers", {"userbuffers"}, {}, U::Communication, P::Unknown,
     "kuserbuffers_pushrecv(int, int, int*, int*, int, unsigned long)"},
    // Custom all-reduce: vLLM's cross_device_reduce_1stage / _2stage, TensorRT-LLM's
    // oneShotAllReduceKernel / twoShotAllReduceKernel and allreduce_fusion_kernel_* (also in
    // FlashInfer's trtllm_allreduce_fusion).
    {"custom_all_reduce", {}, {"cross_device_reduce", "oneshotallreduce", "twoshotallreduce",
                               "allreduce_fusion"},
     U::Communication, P::Unknown,
     "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, "
     "vllm::Signal*, __nv_bfloat16*, int, int)"},
    // DeepEP's expert-parallel all-to-all: deep_ep::{intranode,internode,internode_ll}::dispatch /
    // combine and their notify_* kernels (get_dispatch_layout computes, and is not matched).
    {"deep_ep", {"deep_ep::"}, {"::dispatch", "::combine", "notify_dispatch", "notify_combine"},
     U::Communication, P::Unknown,
     "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, "
     "int*, int4 const*, float const*, long const*, float const*, bool const*, int const*, int, "
     "int, int, int, int, int, int, void**, int, int, int)"},

    // --- look-alikes: names of the Tensor Core families that run on CUDA cores ---
    // FlashAttention's backward and split-KV helpers are elementwise: dO.O row sums, dQ / dK dV
    // conversion, zeroing accumulators, combining splits (FA2 flash_bwd_launch_template.h; FA3
    // hopper/ flash_bwd_{pre,post}process_kernel.h, flash_fwd_combine_kernel.h,
    // flash_prepare_scheduler.cu). FA3's carry the main kernel's TiledMMA (GMMA) in their
    // template arguments, so they must come before the gmma row.
    {"flash_attention_helpers", {},
     {"flash_bwd_dot_do_o", "flash_bwd_convert_dq", "flash_bwd_convert_dkv",
      "flash_bwd_clear_dkvaccum", "flash_fwd_splitkv_combine", "prepare_varlen_num_blocks",
      "flashattnbwdpreprocess", "flashattnbwdpostprocess", "flashattnfwdcombine"},
     U::CudaCores, P::Unknown,
     "void pytorch_flash::flash_bwd_dot_do_o_kernel<true, pytorch_flash::Flash_bwd_kernel_traits<"
     "128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::"
     "Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> > >(pytorch_flash::"
     "Flash_bwd_params)"},
    // cuBLAS/cuDNN xmma kernels doing plain FP32 say so with an _ffma_ (fused multiply-add) tile.
    {"ffma", {"ffma"}, {}, U::CudaCores, P::FP32,
     "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_"
     "alignc4_execute_kernel_trans_a"},
    {"hfma", {word("hfma")}, {}, U::CudaCores, P::FP16,
     "sm80_xmma_gemm_f16f16_f16f16_f16_nn_n_tilesize64x64x8_stage3_warpsize2x2x1_hfma2_execute_"
     "kernel"},
    // Truncated xmma names lose the _ffma_ suffix; f32 inputs with f32 math are the same trap.
    {"xmma_fp32", {"xmma", "f32f32_f32f32_f32"}, {}, U::CudaCores, P::FP32,
     "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3"},
    {"sgemm", {"sgemm"}, {}, U::CudaCores, P::FP32, "volta_sgemm_64x64_nt"},
    {"scudnn", {"scudnn"}, {}, U::CudaCores, P::FP32, "volta_scudnn_128x64_relu_interior_nn_v1"},
    {"simt", {"simt"}, {}, U::CudaCores, P::Unknown,
     "void cutlass::Kernel<cutlass_75_simt_hgemm_256x128_8x2_nn_align1>"
     "(cutlass_75_simt_hgemm_256x128_8x2_nn_align1::Params)"},
    // A word: "BlockScaledGemm" holds the letters of dgemm.
    {"dgemm", {word("dgemm")}, {}, U::CudaCores, P::FP64, "volta_dgemm_64x64_nn"},

    // --- Tensor Cores ---
    // FP64 DMMA (Ampere+): d884 would otherwise read as a Volta 884 kernel. "dmma" is a word:
    // cute's "TiledMMA" holds its letters.
    {"dmma", {}, {word("dmma"), "d884"}, U::TensorCores, P::FP64,
     "void cutlass::Kernel<cutlass_tensorop_d884gemm_128x128_16x3_nn_align1>"
     "(cutlass_tensorop_d884gemm_128x128_16x3_nn_align1::Params)"},
    {"imma", {}, {word("imma"), "i8816", "i16832"}, U::TensorCores, P::INT8,
     "void cutlass::Kernel<cutlass_tensorop_i8816gemm_s8_128x128_64x2_tn_align16>"
     "(cutlass_tensorop_i8816gemm_s8_128x128_64x2_tn_align16::Params)"},
    // Volta's HMMA instruction and the WMMA API over it.
    {"hmma", {word("hmma")}, {}, U::TensorCores, P::Unknown, "volta_fp16_hmma_gemm_128x128_ldg8_nn"},
    {"wmma", {word("wmma")}, {}, U::TensorCores, P::Unknown,
     "void cutlass::Kernel<cutlass_75_wmma_tensorop_h161616gemm_16x16_32x2_nn_align8>"
     "(cutlass_75_wmma_tensorop_h161616gemm_16x16_32x2_nn_align8::Params)"},
    // Volta m8n8k4 (884), FP16 only.
    {"884", {}, {"s884", "h884", "884gemm", "884cudnn"}, U::TensorCores, P::FP16,
     "volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn"},
    // Turing m16n8k8 (1688): FP16 on Turing, also TF32/BF16 on Ampere.
    {"1688", {}, {"s1688", "h1688", "1688gemm", "1688cudnn"}, U::TensorCores, P::Unknown,
     "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn"},
    // Ampere m16n8k16 (16816) and m16n8k32 (16832).
    {"16816", {}, {"16816", "16832"}, U::TensorCores, P::Unknown,
     "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"},
    // Hopper warpgroup MMA (cuBLAS, cuDNN, CUTLASS 3 and FlashAttention 3 all say gmma or wgmma;
    // hgmma holds it inside a word, so it is not one).
    {"gmma", {}, {"gmma", "wgmma"}, U::TensorCores, P::Unknown,
     "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>, "
     "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4>"
     ", cutlass::bfloat16_t, float> > >(cutlass::gemm::kernel::GemmUniversal::Params)"},
    // Blackwell's tcgen05 / UMMA ("umma" a word: not "summation").
    {"tcgen05", {}, {"tcgen05", word("umma")}, U::TensorCores, P::Unknown,
     "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::collective::"
     "CollectiveMma<cutlass::gemm::MainloopSm100TmaUmmaWarpSpecialized<4>, cutlass::half_t> > >"},
    // cuBLAS and cuDNN GEMM / implicit-GEMM convolutions, sm75 to sm100: xmma with a type string.
    {"xmma", {"xmma"}, {}, U::TensorCores, P::Unknown,
     "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_"
     "tensor16x8x16_execute_kernel_trans_a"},
    // cuBLAS's GEMMs on Hopper and Blackwell (warpgroup kernels); hsh = fp16, tst = bf16,
    // sss_tf32 = tf32.
    {"nvjet", {"nvjet"}, {}, U::TensorCores, P::Unknown, "nvjet_hsh_192x192_64x3_2x1_v_bz_coopB_NTN"},
    {"tensorop", {"tensorop"}, {}, U::TensorCores, P::Unknown,
     "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8_"
     "warpspecialized_cooperative_epi_tma"},
    // torch.compile (Inductor) templates: triton_tem_fused_<aten ops>_<n> for mm, addmm, bmm,
    // convolution and flex attention, all built on tl.dot (mma / wgmma for 16-bit, 8-bit and TF32
    // inputs; an fp32 template with TF32 off would run FMA, and its name does not say).
    {"triton_template", {"triton_tem_"}, {}, U::TensorCores, P::Unknown, "triton_tem_fused_mm_0"},
    // FlashAttention 1-4 (flash_fwd/flash_bwd kernels, FlashAttnFwdSm90, FlashAttentionForwardSm100):
    // mma.sync / wgmma / tcgen05, built only for sm_75+ (FA1) and sm_80+ (FA2 and later).
    {"flash_attention", {}, {"flash_fwd", "flash_bwd", "flashattn", "flashattention"},
     U::TensorCores, P::Unknown,
     "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 64, 64, 4, "
     "false, false, cutlass::bfloat16_t>, false, false, false, false, true, true, false, false>"
     "(pytorch_flash::Flash_fwd_params)"},
    // Memory-efficient attention (PyTorch, xformers: fmha_cutlassF/B_<type>_..._smXY), CUTLASS
    // FMHA examples, TensorRT-LLM fmha_v2: tensor-op GEMMs for 16-bit types from sm70, SIMT below.
    {"fmha", {"fmha"}, {}, U::FusedAttention, P::Unknown,
     "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::"
     "half_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)"},
    // cuDNN's generated fused attention: cudnn_generated_fort_native_sdpa_smXY_flash_{f,b}prop_...
    // (sm80 names often say wmma, sm90 wgmma: those rows come first; sm100 names say neither).
    {"cudnn_sdpa", {"sdpa"}, {"cudnn", "fort_native"}, U::FusedAttention, P::Unknown,
     "cudnn_generated_fort_native_sdpa_sm100_flash_fprop_f16_knob_7_128x128x128_4x1x1_cga1x1x1_"
     "kernel0_0"},

    // --- CUDA cores, named so the report can say what the time went to ---
    // "cgemm" inside a word too: cuBLAS's gcgemm.
    {"cgemm", {"cgemm"}, {}, U::CudaCores, P::FP32, "ampere_gcgemm_64x64_nt"},
    {"gemv", {"gemv"}, {}, U::CudaCores, P::Unknown,
     "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>"},
    {"cudnn_cuda_cores", {}, {"dgrad_engine", "wgrad_alg", "winograd", "fft2d", "convolve"},
     U::CudaCores, P::Unknown,
     "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float "
     "const*, int, float const*, int, float*, kernel_grad_params, unsigned long long, int, "
     "unsigned long long, int, float, int, int, int)"},
    // Inductor's pointwise, reduction and persistent-reduction kernels: no tl.dot in them.
    {"triton_fused", {}, {"triton_poi_", "triton_red_", "triton_per_"}, U::CudaCores, P::Unknown,
     "triton_poi_fused_add_mul_0"},
    // Helpers: elementwise, reductions and normalizations, indexing and embeddings.
    {"elementwise", {},
     {"elementwise", "copy", "fill", "cast", "convert", "quantize", "transpose", "nchwtonhwc",
      "nhwctonchw", "dropout", "im2col", "epilogue"},
     U::CudaCores, P::Unknown,
     "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, "
     "3>)"},
    {"reduction", {},
     {"reduce", "softmax", "norm", "moments", "gammabeta", "amax", "sort", "scan", "cudnn::bn_",
      "pool"},
     U::CudaCores, P::Unknown, "void at::native::reduce_kernel<512, 1>"},
    {"indexing", {},
     {"index", "indices", "gather", "scatter", "embedding", "embs", "permute", "offsets"},
     U::CudaCores, P::Unknown,
     "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, "
     "long, 2ul, 32ul>(at::GenericPackedTensorAccessor<c10::Half, 1ul, at::RestrictPtrTraits, "
     "long>)"},
    // A low-bit float type, in a name no row above knows (the helpers have claimed the casts and
    // fills): CUDA cores have no FP8 / FP6 / FP4 arithmetic, so the kernel runs on Tensor Cores.
    // Plain "fp8" is not enough: fbgemm's FP8 quantize and dequantize kernels say it.
    {"low_bit_float", {},
     {"e4m3", "e5m2", "e2m1", "e3m2", "e2m3", "ue8m0", "nvfp4", "mxfp8", "mxfp6", "mxfp4", "mxf8",
      "mxf6", "mxf4"},
     U::TensorCores, P::Unknown,
     "void moe_grouped_gemm_kernel<__nv_fp8_e4m3, __nv_fp8_e4m3, __nv_bfloat16, 128, 128, 128>"
     "(void const*, void const*, void*, float const*, float const*, long const*, int, int, int)"},
    // PyTorch's own kernels (at::native, and the THCUNN-era cunn_* losses) and the CUDA / cuDNN
    // helper libraries that none of the above named: ATen's GEMMs and convolutions go to cuBLAS,
    // cuDNN and CUTLASS, whose rows come first.
    {"aten_native", {}, {"at::native::", word("cunn"), "at_cuda_detail::", "cub::", "thrust::",
                         "cudnn::", "cask_cudnn::"},
     U::CudaCores, P::Unknown,
     "void at::native::(anonymous namespace)::upsample_nearest2d_out_frame<float, "
     "at::native::nearest_idx>(float const*, float*, unsigned long, unsigned long, unsigned long, "
     "unsigned long, unsigned long, float, float)"},
};
// clang-format on

// ASCII only, inline: std::tolower is a call through the C locale per character, and with
// std::search over every row's tokens it made a 210-byte name cost ~40 us to classify (300k
// distinct names in an activity file took longer than a minute).
constexpr char lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// A name cut to the classified prefix with its lowercase copy beside it, on the stack (this runs
// in vendor callbacks: no allocation), so each token is one string_view::find over lowercase text.
// Beside them, the set of the name's three-letter runs (hashed into 1,024 bits): a token with a
// run the name lacks cannot be in it, and most of the table's ~200 tokens are ruled out so
// without a find. The finds over a 210-byte name were most of its 3.3 us (2M distinct names in a
// trace, each classified past the aggregator's row limit, spent 6 s in them).
class LoweredName {
 public:
  explicit LoweredName(std::string_view name) noexcept : text_(kernel_name_prefix(name)) {
    for (std::size_t i = 0; i < text_.size(); ++i) lowered_[i] = lower(text_[i]);
    for (std::size_t i = 0; i + 2 < text_.size(); ++i) {
      const unsigned h = run_hash(lowered_ + i);
      runs_[h / 64] |= std::uint64_t{1} << (h % 64);
    }
  }
  LoweredName(const LoweredName&) = delete;
  LoweredName& operator=(const LoweredName&) = delete;
  std::string_view text() const noexcept { return text_; }
  std::string_view lowered() const noexcept { return {lowered_, text_.size()}; }
  // False when the lowercase text cannot occur in the name (one of its runs is not the name's);
  // true says only that it may (runs share bits): a find decides. Never false for text that is
  // there, so what the table decides is what it decided without this.
  bool may_contain(std::string_view t) const noexcept {
    for (std::size_t i = 0; i + 2 < t.size(); ++i) {
      const unsigned h = run_hash(t.data() + i);
      if (!((runs_[h / 64] >> (h % 64)) & 1)) return false;
    }
    return true;
  }

 private:
  static unsigned run_hash(const char* c) noexcept {
    const auto a = static_cast<unsigned char>(c[0]), b = static_cast<unsigned char>(c[1]),
               d = static_cast<unsigned char>(c[2]);
    return (a * 961u + b * 31u + d) & 1023u;
  }
  std::string_view text_;
  std::uint64_t runs_[16] = {};
  char lowered_[kKernelNameBytes];
};

// Character classes for word boundaries: other, digit, upper, lower.
int char_class(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  if (std::isdigit(u)) return 1;
  if (std::isupper(u)) return 2;
  if (std::islower(u)) return 3;
  return 0;
}

// Between a and b a word ends / begins: a non-alphanumeric side, or a change of class other than
// a capital followed by lower case ("Umma" is one word).
bool boundary(char a, char b) noexcept {
  const int x = char_class(a), y = char_class(b);
  if (x == 0 || y == 0) return true;
  return x != y && !(x == 2 && y == 3);
}

// Case-insensitive token test; token text is lowercase. The search runs on the lowercase copy,
// word boundaries on the original (a capital starts a word).
bool contains(const LoweredName& name, const NameToken& token) noexcept {
  const std::string_view t = token.text;
  if (t.empty()) return true;
  if (!name.may_contain(t)) return false;
  const std::string_view text = name.text(), low = name.lowered();
  for (std::size_t at = low.find(t); at != std::string_view::npos; at = low.find(t, at + 1)) {
    if (!token.whole_word) return true;
    const std::size_t end = at + t.size();
    const bool starts = at == 0 || boundary(text[at - 1], text[at]);
    const bool ends = end == text.size() || boundary(text[end - 1], text[end]);
    if (starts && ends) return true;
  }
  return false;
}

bool contains_text(const LoweredName& name, std::string_view text) noexcept {
  return contains(name, NameToken(text, false));
}

bool matches(const KernelRule& r, const LoweredName& name) noexcept {
  for (const NameToken& t : r.all_of)
    if (!t.text.empty() && !contains(name, t)) return false;
  bool any_given = false;
  for (const NameToken& t : r.any_of) {
    if (t.text.empty()) continue;
    any_given = true;
    if (contains(name, t)) return true;
  }
  return !any_given;
}

// cuBLAS nvjet names carry the types as letters after the prefix: nvjet_[smNN_]hsh_..., tst_...
// An "s" (fp32) first letter says nothing until a tf32 token does: left to precision_from_name.
Precision nvjet_precision(const LoweredName& lowered) noexcept {
  const std::string_view name = lowered.text();
  const std::size_t found = lowered.lowered().find("nvjet_");
  if (found == std::string_view::npos) return P::Unknown;
  std::size_t at = found + 6;
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

bool fp32_math(const LoweredName& name, Precision p) noexcept {
  return p == P::FP32 || p == P::FP64 || name.lowered().find("ffma") != std::string_view::npos;
}

// Fused attention: the architecture the kernel was built for, else the device's.
KernelClass fused_attention(KernelClass c, const LoweredName& lowered,
                            ComputeCapability device) noexcept {
  int sm = sm_from_name(lowered.text());
  if (sm == 0 && device.known()) sm = device.sm();
  if (sm == 0) {
    c.decision = Decision::Unknown;
    c.needs_capability = true;
  } else if (sm < 70) {
    c.tensor_core = false;  // no Tensor Cores before Volta: the SIMT path
  } else if (fp32_math(lowered, c.precision)) {
    c.decision = Decision::Unknown;  // fp32 runs SIMT, or as TF32 emulation on sm80: not said
  } else if (sm >= 80 || c.precision == P::FP16) {
    c.tensor_core = true;  // Volta and Turing have fp16 Tensor Cores only
  } else {
    c.decision = Decision::Unknown;
  }
  return c;
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
    case P::FP6:
      return "fp6";
    case P::FP4:
      return "fp4";
    case P::INT8:
      return "int8";
    case P::Unknown:
      break;
  }
  return "unknown";
}

std::string_view decision_name(Decision d) noexcept {
  switch (d) {
    case Decision::ByName:
      return "name";
    case Decision::ByOp:
      return "op";
    case Decision::Unknown:
      break;
  }
  return "unknown";
}

std::span<const KernelRule> kernel_rules() noexcept { return kRules; }

Precision precision_from_name(std::string_view name) noexcept {
  // Narrow and unusual types first: a bf16 name also contains "f16", a tf32 one "f32". CUTLASS's
  // s1688gemm without an input type is fp32 data on m16n8k8, which only TF32 has; it comes after
  // the 16-bit types (s1688gemm_f16) and before f32 / float.
  struct Token {
    std::string_view text;
    Precision precision;
  };
  static constexpr Token kTokens[] = {
      {"e2m1", P::FP4},       {"nvfp4", P::FP4},  {"mxfp4", P::FP4},     {"mxf4", P::FP4},
      {"e3m2", P::FP6},       {"e2m3", P::FP6},   {"mxfp6", P::FP6},     {"mxf6", P::FP6},
      {"e4m3", P::FP8},       {"e5m2", P::FP8},   {"mxfp8", P::FP8},     {"mxf8", P::FP8},
      {"fp8", P::FP8},        {"bf16", P::BF16},  {"bfloat16", P::BF16}, {"tf32", P::TF32},
      {"f16", P::FP16},       {"fp16", P::FP16},  {"half", P::FP16},     {"h884", P::FP16},
      {"h1688", P::FP16},     {"int8", P::INT8},  {"s8s8", P::INT8},     {"i8i8", P::INT8},
      {"s1688gemm", P::TF32}, {"f64", P::FP64},   {"fp64", P::FP64},     {"f32", P::FP32},
      {"fp32", P::FP32},      {"float", P::FP32}, {"double", P::FP64},
  };
  // The template arguments say the element type; the parameters are scalars or repeat them. C++
  // "double" comes last: in a kernel that names float (or a narrower type) as well, the doubles
  // are scalars passed by value (the fused optimizers' lr, betas and eps), not its data.
  const LoweredName types(without_parameters(name));
  for (const Token& t : kTokens)
    if (contains_text(types, t.text)) return t.precision;
  return P::Unknown;
}

int sm_from_name(std::string_view name) noexcept {
  for (std::size_t i = 0; i + 2 < name.size(); ++i) {
    if (lower(name[i]) != 's' || lower(name[i + 1]) != 'm') continue;
    if (i > 0 && !boundary(name[i - 1], name[i])) continue;
    std::size_t d = i + 2;
    if (d < name.size() && name[d] == '_') ++d;
    int sm = 0, digits = 0;
    while (d < name.size() && std::isdigit(static_cast<unsigned char>(name[d])) && digits < 4) {
      sm = sm * 10 + (name[d] - '0');
      ++d;
      ++digits;
    }
    if (digits >= 2 && digits <= 3 &&
        (d == name.size() || !std::isdigit(static_cast<unsigned char>(name[d]))))
      return sm;
  }
  return 0;
}

KernelClass classify_kernel(std::string_view name) noexcept {
  return classify_kernel(name, ComputeCapability{});
}

KernelClass classify_kernel(std::string_view name, ComputeCapability device) noexcept {
  const LoweredName lowered(name);
  name = lowered.text();
  for (const KernelRule& r : kRules) {
    if (!matches(r, lowered)) continue;
    KernelClass c;
    c.family = r.family;
    c.communication = r.unit == U::Communication;
    c.tensor_core = r.unit == U::TensorCores;
    c.precision = r.precision;
    if (c.precision == P::Unknown && !c.communication) {
      if (r.family == "nvjet") c.precision = nvjet_precision(lowered);
      if (c.precision == P::Unknown) c.precision = precision_from_name(name);
    }
    if (r.unit == U::FusedAttention) return fused_attention(c, lowered, device);
    return c;
  }
  KernelClass c;
  c.decision = Decision::Unknown;
  c.precision = precision_from_name(name);
  return c;
}

}  // namespace fathom
