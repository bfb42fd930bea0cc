#include <fathom/kernel_classifier.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace fathom {
namespace {

struct Case {
  const char* name;
  bool tensor_core;
  const char* family;
  Precision precision;
};

// Real names (from cuBLAS, cuDNN, CUTLASS, NCCL, PyTorch profiler traces and Nsight reports),
// Volta to Blackwell, and the traps that only look like Tensor Core kernels.
const Case kCases[] = {
    // Volta: HMMA m8n8k4.
    {"volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", true, "884", Precision::FP16},
    {"volta_h884gemm_64x64_ldg8_nn", true, "884", Precision::FP16},
    {"volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1", true, "884",
     Precision::FP16},
    {"volta_fp16_hmma_gemm_128x128_ldg8_nn", true, "hmma", Precision::FP16},
    {"void nvcuda::wmma_gemm_kernel<__half>(__half const*, __half const*, float*)", true, "wmma",
     Precision::FP16},
    // Turing: m16n8k8, int8 IMMA.
    {"turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn", true, "1688", Precision::FP16},
    {"turing_h1688gemm_256x128_ldg8_tn", true, "1688", Precision::FP16},
    {"turing_fp16_s1688cudnn_fp16_128x128_ldg8_relu_f2f_exp_interior_nhwc_tn_v1", true, "1688",
     Precision::FP16},
    {"void cutlass::Kernel<cutlass_tensorop_i8816gemm_s8_128x128_64x2_tn_align16>"
     "(cutlass_tensorop_i8816gemm_s8_128x128_64x2_tn_align16::Params)",
     true, "imma", Precision::INT8},
    // Ampere: 16816, TF32 xmma, cuDNN implicit GEMM, CUTLASS tensorop, FP64 DMMA.
    {"ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_stages_32x3_nn", true, "16816", Precision::FP16},
    {"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", true, "16816", Precision::BF16},
    {"ampere_bf16_s1688gemm_bf16_128x128x32", true, "1688", Precision::BF16},
    {"sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize32x32x64_stage3_warpsize2x1x2_tensor16x8x8",
     true, "xmma", Precision::TF32},
    {"sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_"
     "tensor16x8x16_execute_kernel_trans_a",
     true, "xmma", Precision::BF16},
    {"sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_"
     "stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel",
     true, "xmma", Precision::TF32},
    {"sm86_xmma_dgrad_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4_"
     "warpsize2x2x1_g1_tensor16x8x16_execute_kernel",
     true, "xmma", Precision::FP16},
    {"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>"
     "(cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1::Params)",
     true, "1688", Precision::Unknown},
    {"cutlass_tensorop_bf16_s16816gemm_bf16_256x128_32x3_tn_align8", true, "16816",
     Precision::BF16},
    {"void cutlass::Kernel<cutlass_tensorop_d884gemm_128x128_16x3_nn_align1>"
     "(cutlass_tensorop_d884gemm_128x128_16x3_nn_align1::Params)",
     true, "dmma", Precision::FP64},
    {"sm80_xmma_gemm_f64f64_f64f64_f64_nt_n_tilesize64x128x16_stage3_warpsize2x2x1_tensor8x8x4",
     true, "xmma", Precision::FP64},
    // Hopper: sm90 xmma, gmma / wgmma, CUTLASS 3, cuBLAS nvjet, FlashAttention.
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     true, "xmma", Precision::BF16},
    {"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     true, "xmma", Precision::TF32},
    {"sm90_gemm_f16f16_f32f32_f16_tn_n_tilesize128x128x64_hgmma_warpspecialized", true, "gmma",
     Precision::FP16},
    {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64_4x1x1_kernel0_0",
     true, "gmma", Precision::FP16},
    {"cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8_"
     "warpspecialized_cooperative_epi_tma",
     true, "tensorop", Precision::BF16},
    {"nvjet_hsh_192x192_64x3_2x1_v_bz_coopB_NTN", true, "nvjet", Precision::FP16},
    {"nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNN", true, "nvjet", Precision::BF16},
    {"nvjet_sm90_hss_320x128_64x3_1x2_h_bz_coopA_NNN", true, "nvjet", Precision::FP16},
    {"void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 64, 64, 4, "
     "false, false, cutlass::bfloat16_t>, false, false, false, false, true, true, false, false>"
     "(pytorch_flash::Flash_fwd_params)",
     true, "flash_attention", Precision::BF16},
    {"fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::"
     "half_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
     true, "flash_attention", Precision::FP16},
    // Blackwell: sm100 xmma, tcgen05 / UMMA, nvjet sm100.
    {"sm100_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_cgasize2x1x1_execute_kernel",
     true, "xmma", Precision::BF16},
    {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::collective::"
     "CollectiveMma<cutlass::gemm::MainloopSm100TmaUmmaWarpSpecialized<4>, cutlass::half_t> > >",
     true, "tcgen05", Precision::FP16},
    {"kernel_tcgen05_mma_e4m3_128x256", true, "tcgen05", Precision::FP8},
    {"nvjet_sm100_tst_64x32_64x16_2x1_2cta_h_bz_TNT", true, "nvjet", Precision::BF16},
    {"sm100_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_execute_kernel", true, "xmma",
     Precision::FP8},

    // --- traps: Tensor Core look-alikes on CUDA cores ---
    {"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_"
     "alignc4_execute_kernel_trans_a",
     false, "ffma", Precision::FP32},
    {"sm86_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize64x32x8_stage4_"
     "warpsize2x1x1_g1_ffma_aligna4_alignc4_execute_kernel",
     false, "ffma", Precision::FP32},
    {"sm80_xmma_gemm_f16f16_f16f16_f16_nn_n_tilesize64x64x8_stage3_warpsize2x2x1_hfma2_execute_"
     "kernel",
     false, "hfma", Precision::FP16},
    {"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3", false, "xmma_fp32",
     Precision::FP32},
    {"volta_sgemm_64x64_nt", false, "sgemm", Precision::FP32},
    {"ampere_sgemm_32x32_sliced1x4_tn", false, "sgemm", Precision::FP32},
    {"void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int, "
     "int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, "
     "int, float, float, int, float const*, float const*, bool, int, int)",
     false, "sgemm", Precision::FP32},
    {"volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", false, "scudnn",
     Precision::FP32},
    {"cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1", false, "scudnn", Precision::FP32},
    {"void cutlass::Kernel<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>"
     "(cutlass_80_simt_sgemm_128x128_8x4_nn_align1::Params)",
     false, "sgemm", Precision::FP32},
    {"void cutlass::Kernel<cutlass_75_simt_hgemm_256x128_8x2_nn_align1>"
     "(cutlass_75_simt_hgemm_256x128_8x2_nn_align1::Params)",
     false, "simt", Precision::Unknown},
    {"volta_dgemm_64x64_nn", false, "dgemm", Precision::FP64},
    {"ampere_gcgemm_64x64_nt", false, "cgemm", Precision::FP32},
    {"void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>",
     false, "gemv", Precision::FP32},
    {"void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, "
     "float const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, float, "
     "int, int, int, int)",
     false, "cudnn_cuda_cores", Precision::FP32},
    {"void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*, int, int, int, int, "
     "int, "
     "int, int, int, int, cudnn::reduced_divisor, bool, int2, int, int)",
     false, "cudnn_cuda_cores", Precision::FP32},

    // --- communication ---
    {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", false,
     "nccl", Precision::Unknown},
    {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", false, "nccl",
     Precision::Unknown},

    // --- everything else ---
    {"void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, "
     "3>)",
     false, "other", Precision::FP32},
    {"void at::native::reduce_kernel<512, 1>", false, "other", Precision::Unknown},
};

TEST(KernelClassifier, TableOfRealNames) {
  for (const Case& c : kCases) {
    const KernelClass k = classify_kernel(c.name);
    EXPECT_EQ(k.tensor_core, c.tensor_core) << c.name;
    EXPECT_EQ(k.family, c.family) << c.name;
    EXPECT_EQ(k.precision, c.precision) << c.name << ": got " << precision_name(k.precision)
                                        << ", want " << precision_name(c.precision);
  }
}

TEST(KernelClassifier, EveryRowIsCoveredByTheTable) {
  std::set<std::string_view> tested;
  for (const Case& c : kCases) tested.insert(c.family);
  for (const KernelRule& r : kernel_rules()) EXPECT_TRUE(tested.count(r.family)) << r.family;
  EXPECT_TRUE(tested.count("other"));
}

// A row whose own example is claimed by an earlier row can never match: the table would lie.
TEST(KernelClassifier, EveryRowMatchesItsOwnExample) {
  for (const KernelRule& r : kernel_rules()) {
    EXPECT_EQ(classify_kernel(r.example).family, r.family) << r.example;
    EXPECT_EQ(classify_kernel(r.example).tensor_core, r.tensor_core) << r.example;
  }
}

TEST(KernelClassifier, FamiliesAreUnique) {
  std::set<std::string_view> seen;
  for (const KernelRule& r : kernel_rules()) EXPECT_TRUE(seen.insert(r.family).second) << r.family;
}

TEST(KernelClassifier, NcclIsCommunicationNotCompute) {
  const KernelClass k =
      classify_kernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
  EXPECT_TRUE(k.communication);
  EXPECT_FALSE(k.tensor_core);
  EXPECT_FALSE(classify_kernel("volta_sgemm_64x64_nt").communication);
}

TEST(KernelClassifier, CaseDoesNotMatter) {
  EXPECT_TRUE(classify_kernel("SM80_XMMA_GEMM_BF16BF16_BF16F32_F32").tensor_core);
  EXPECT_EQ(classify_kernel("SM80_XMMA_GEMM_BF16BF16_BF16F32_F32").precision, Precision::BF16);
  EXPECT_FALSE(classify_kernel("VOLTA_SGEMM_128x64_NN").tensor_core);
}

TEST(KernelClassifier, EmptyNameIsOther) {
  const KernelClass k = classify_kernel("");
  EXPECT_EQ(k.family, "other");
  EXPECT_FALSE(k.tensor_core);
  EXPECT_EQ(k.precision, Precision::Unknown);
}

TEST(KernelClassifier, PrecisionNames) {
  EXPECT_EQ(precision_name(Precision::TF32), "tf32");
  EXPECT_EQ(precision_name(Precision::BF16), "bf16");
  EXPECT_EQ(precision_name(Precision::Unknown), "unknown");
}

}  // namespace
}  // namespace fathom
