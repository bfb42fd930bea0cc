#include "aggregate/kernel_classifier.h"

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
    // CUTLASS's s1688gemm with no input type: fp32 data on m16n8k8, which on Ampere is TF32.
    {"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>"
     "(cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1::Params)",
     true, "1688", Precision::TF32},
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
    {"nvjet_sss_tf32_128x256_64x4_2x1_v_bz_coopB_TNT", true, "nvjet", Precision::TF32},
    {"void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 64, 64, 4, "
     "false, false, cutlass::bfloat16_t>, false, false, false, false, true, true, false, false>"
     "(pytorch_flash::Flash_fwd_params)",
     true, "flash_attention", Precision::BF16},
    {"fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::"
     "half_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
     true, "fmha", Precision::FP16},
    // FlashAttention 3 (Hopper) and cuDNN's fused SDPA without an instruction in the name.
    {"void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::"
     "CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<"
     "cute::C<128>, cute::C<128>, cute::C<128> >, 128, cutlass::bfloat16_t, float, cutlass::arch::"
     "Sm90, true, false> > > >(flash::FlashAttnFwdSm90<...>::Params)",
     true, "flash_attention", Precision::BF16},
    {"cudnn_generated_fort_native_sdpa_sm100_flash_fprop_f16_knob_7_128x128x128_4x1x1_cga1x1x1_"
     "kernel0_0",
     true, "cudnn_sdpa", Precision::FP16},
    {"cudnn_generated_fort_native_sdpa_sm80_flash_bprop_bf16_knob_2_64x128x64_1x4x1_cga1x1x1_"
     "kernel0_0",
     true, "cudnn_sdpa", Precision::BF16},
    {"cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_cga1x1x1_"
     "kernel0_0",
     true, "wmma", Precision::FP16},
    // torch.compile (Inductor) Triton templates: GEMMs and convolutions on tl.dot.
    {"triton_tem_fused_mm_0", true, "triton_template", Precision::Unknown},
    {"triton_tem_fused_addmm_1", true, "triton_template", Precision::Unknown},
    {"triton_tem_fused_bmm_7", true, "triton_template", Precision::Unknown},
    {"triton_tem_fused__to_copy_convolution_repeat_unsqueeze_view_2", true, "triton_template",
     Precision::Unknown},
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

    // Low-bit float types: CUDA cores have no FP8 / FP6 / FP4 arithmetic, so a kernel no row
    // knows that computes in them is a Tensor Core kernel.
    {"void moe_grouped_gemm_kernel<__nv_fp8_e4m3, __nv_fp8_e4m3, __nv_bfloat16, 128, 128, 128>"
     "(void const*, void const*, void*, float const*, float const*, long const*, int, int, int)",
     true, "low_bit_float", Precision::FP8},
    {"void blockscaled_gemm_kernel<cutlass::float_e2m1_t, cutlass::float_ue4m3_t, "
     "cutlass::bfloat16_t>(BlockScaledGemmParams)",
     true, "low_bit_float", Precision::FP4},

    // --- traps: Tensor Core look-alikes on CUDA cores ---
    // FlashAttention's backward helpers are elementwise (dO.O row sums, dQ conversion, zeroing);
    // FA3's carry the main kernel's TiledMMA (GMMA) in their template arguments.
    {"void pytorch_flash::flash_bwd_dot_do_o_kernel<true, pytorch_flash::Flash_bwd_kernel_traits<"
     "128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::"
     "Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> > >(pytorch_flash::"
     "Flash_bwd_params)",
     false, "flash_attention_helpers", Precision::BF16},
    {"void pytorch_flash::flash_bwd_convert_dq_kernel<pytorch_flash::Flash_bwd_kernel_traits<128, "
     "64, 128, 8, 2, 4, 2, false, false, cutlass::half_t, pytorch_flash::Flash_kernel_traits<128, "
     "64, 128, 8, cutlass::half_t> > >(pytorch_flash::Flash_bwd_params, int)",
     false, "flash_attention_helpers", Precision::FP16},
    {"void flash::flash_bwd_clear_dkvaccum_kernel<Flash_bwd_kernel_traits<64, 128, 128, 8, 4, 4, "
     "4, false, false, cutlass::half_t, Flash_kernel_traits<64, 128, 128, 8, cutlass::half_t> > >"
     "(Flash_bwd_params)",
     false, "flash_attention_helpers", Precision::FP16},
    {"void flash::prepare_varlen_num_blocks_kernel<90>(int, int, int, int const*, int const*, int "
     "const*, int const*, int const*, int, int, int, int, int, cutlass::FastDivmod, "
     "cutlass::FastDivmod, int*, int*, int*, bool)",
     false, "flash_attention_helpers", Precision::Unknown},
    {"void cutlass::device_kernel<flash::FlashAttnBwdPostprocessConvertdQ<cute::tuple<cute::C<64>, "
     "cute::C<128> >, cutlass::bfloat16_t, float, cutlass::arch::Sm90, 256, cute::TiledMMA<cute::"
     "MMA_Atom<cute::SM90_64x128x16_F32BF16BF16_SS<(cute::GMMA::Major)0, (cute::GMMA::Major)1, "
     "(cute::GMMA::ScaleIn)1, (cute::GMMA::ScaleIn)1> >, cute::Layout<cute::tuple<cute::C<2>, "
     "cute::C<1>, cute::C<1> > >, cute::tuple<cute::Underscore, cute::Underscore, "
     "cute::Underscore> >, false> >(flash::FlashAttnBwdPostprocessConvertdQ<>::Params)",
     false, "flash_attention_helpers", Precision::BF16},
    {"void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<cute::C<64>, cute::C<"
     "128> >, cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, false> >(flash::"
     "FlashAttnBwdPreprocess<>::Params)",
     false, "flash_attention_helpers", Precision::BF16},
    // "umma" is a word of Blackwell names (TmaUmma, UMMA::), not every name with "summa" in it.
    {"void kahan_summation_kernel<float>(float const*, float*, long)", false, "other",
     Precision::FP32},
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

    // --- CUDA-core helpers: elementwise, reductions, indexing, Inductor's fused Triton kernels ---
    {"void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, "
     "3>)",
     false, "elementwise", Precision::FP32},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::Float8_e4m3fn>"
     ", at::detail::Array<char*, 1> >(int, at::native::FillFunctor<c10::Float8_e4m3fn>, "
     "at::detail::Array<char*, 1>)",
     false, "elementwise", Precision::FP8},
    {"void at::native::reduce_kernel<512, 1>", false, "reduction", Precision::Unknown},
    {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, "
     "float, float const*, float const*, float const*, float*, float*, float*)",
     false, "reduction", Precision::FP32},
    {"void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, "
     "long, 2ul, 32ul>(at::GenericPackedTensorAccessor<c10::Half, 1ul, at::RestrictPtrTraits, "
     "long>)",
     false, "indexing", Precision::FP16},
    {"void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float "
     "const*, long, long, long, int, int, int, int, int, int, int, int, int, int, float*, long*)",
     false, "reduction", Precision::FP32},
    {"void at::native::(anonymous namespace)::upsample_nearest2d_out_frame<float, "
     "at::native::nearest_idx>(float const*, float*, unsigned long, unsigned long, unsigned long, "
     "unsigned long, unsigned long, float, float)",
     false, "aten_native", Precision::FP32},
    {"triton_poi_fused_add_mul_0", false, "triton_fused", Precision::Unknown},
    {"triton_red_fused__to_copy_mean_pow_1", false, "triton_fused", Precision::Unknown},

    // --- nothing in the name says: unknown ---
    {"void my_model::fused_block_kernel<__nv_bfloat16>(__nv_bfloat16 const*, __nv_bfloat16*, int)",
     false, "other", Precision::BF16},
};

struct CommCase {
  const char* name;
  const char* family;
};

// Communication beyond NCCL: torch's symmetric memory, NVSHMEM, TransformerEngine's userbuffers,
// the custom all-reduce kernels of vLLM, TensorRT-LLM and FlashInfer, DeepEP's all-to-all.
const CommCase kCommunication[] = {
    {"void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, "
     "unsigned long, unsigned int**, unsigned long, unsigned long)",
     "symmetric_memory"},
    {"void (anonymous namespace)::one_shot_all_reduce_kernel<c10::BFloat16, 16, "
     "8>(c10::BFloat16**, "
     "c10::BFloat16*, c10::BFloat16*, unsigned long, unsigned long, unsigned int**, unsigned long, "
     "unsigned long)",
     "symmetric_memory"},
    {"void (anonymous namespace)::two_shot_all_reduce_kernel<float, 16, 4, false, false>(float**, "
     "float*, unsigned long, unsigned long, unsigned int**, unsigned long, unsigned long, unsigned "
     "long)",
     "symmetric_memory"},
    {"allToAllV(void*, void*, long*, unsigned long, int, int)", "symmetric_memory"},
    {"void nvshmemi_proxy_rma_entrypoint<(nvshmemi_op_t)0, 1>(void*, void*, rma_bytesdesc_t, int)",
     "nvshmem"},
    {"void userbuffers_fp16_sum_inplace_gpu_rw<8>(int, int, int, int, int, int, void**, int, "
     "unsigned long)",
     "userbuffers"},
    {"kuserbuffers_pushrecv(int, int, int*, int*, int, unsigned long)", "userbuffers"},
    {"void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, "
     "vllm::Signal*, __nv_bfloat16*, int, int)",
     "custom_all_reduce"},
    {"void vllm::cross_device_reduce_2stage<half, 4>(vllm::RankData*, vllm::RankSignals, "
     "vllm::Signal*, half*, int, int)",
     "custom_all_reduce"},
    {"void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8, true, false>"
     "(tensorrt_llm::kernels::AllReduceParams)",
     "custom_all_reduce"},
    {"void tensorrt_llm::kernels::twoShotAllReduceKernel<half, 4, true, false>(tensorrt_llm::"
     "kernels::AllReduceParams)",
     "custom_all_reduce"},
    {"void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<("
     "flashinfer::trtllm_allreduce_fusion::AllReduceFusionPattern)1, __nv_bfloat16, 8, false, "
     "false>(flashinfer::trtllm_allreduce_fusion::AllReduceFusionParams)",
     "custom_all_reduce"},
    {"void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, "
     "int*, int4 const*, float const*, long const*, float const*, bool const*, int const*, int, "
     "int, int, int, int, int, int, void**, int, int, int)",
     "deep_ep"},
    {"void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, float*, int*, "
     "__nv_bfloat16 const*, float const*, int const*, int const*, int const*, void**, int, int, "
     "int, int, int)",
     "deep_ep"},
};

TEST(KernelClassifier, CommunicationBeyondNccl) {
  for (const CommCase& c : kCommunication) {
    const KernelClass k = classify_kernel(c.name);
    EXPECT_TRUE(k.communication) << c.name;
    EXPECT_FALSE(k.tensor_core) << c.name;
    EXPECT_EQ(k.family, c.family) << c.name;
  }
}

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
  for (const CommCase& c : kCommunication) tested.insert(c.family);
  for (const KernelRule& r : kernel_rules()) EXPECT_TRUE(tested.count(r.family)) << r.family;
  EXPECT_TRUE(tested.count("other"));
}

// A row whose own example is claimed by an earlier row can never match: the table would lie.
TEST(KernelClassifier, EveryRowMatchesItsOwnExample) {
  for (const KernelRule& r : kernel_rules()) {
    const KernelClass k = classify_kernel(r.example);
    EXPECT_EQ(k.family, r.family) << r.example;
    EXPECT_EQ(k.decision, Decision::ByName) << r.example;
    EXPECT_EQ(k.communication, r.unit == RuleUnit::Communication) << r.example;
    // Fused attention examples name their architecture (sm80, sm100): Tensor Cores.
    EXPECT_EQ(k.tensor_core, r.unit == RuleUnit::TensorCores || r.unit == RuleUnit::FusedAttention)
        << r.example;
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
  EXPECT_EQ(k.decision, Decision::Unknown);
  EXPECT_EQ(k.precision, Precision::Unknown);
}

// No row, no verdict: an unknown name is its own class, not a CUDA-core kernel.
TEST(KernelClassifier, NamesNoRowKnowsAreUnknownNotCudaCores) {
  for (const char* n : {"void my_model::fused_block_kernel<__nv_bfloat16>(int)", "Kernel2",
                        "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, "
                        "int*, int*, bool*, int, int, int, int)"}) {
    const KernelClass k = classify_kernel(n);
    EXPECT_EQ(k.decision, Decision::Unknown) << n;
    EXPECT_FALSE(k.tensor_core) << n;
    EXPECT_FALSE(k.communication) << n;
  }
  EXPECT_EQ(classify_kernel("volta_sgemm_64x64_nt").decision, Decision::ByName);
  EXPECT_EQ(decision_name(Decision::ByName), "name");
  EXPECT_EQ(decision_name(Decision::ByOp), "op");
  EXPECT_EQ(decision_name(Decision::Unknown), "unknown");
}

// Short tokens match whole words only: camelCase humps and digits end words, "_" and "::" too.
TEST(KernelClassifier, ShortTokensRespectWordBoundaries) {
  EXPECT_FALSE(
      classify_kernel("void kahan_summation_kernel<float>(float const*, float*)").tensor_core);
  EXPECT_FALSE(classify_kernel("void SUMMARY_KERNEL(int)").tensor_core);
  EXPECT_TRUE(classify_kernel("void gemm<(cute::UMMA::Major)0, 128, 256>(Params)").tensor_core);
  EXPECT_EQ(classify_kernel("void gemm<(cute::UMMA::Major)0, 128, 256>(Params)").family, "tcgen05");
  EXPECT_EQ(classify_kernel("void blockscaled_gemm<float>(BlockScaledGemmParams)").family, "other");
  EXPECT_EQ(classify_kernel("void attn<cute::TiledMMA<int>, float>(Params)").family, "other");
  EXPECT_EQ(classify_kernel("sm80_xmma_gemm_f16f16_f16f16_f16_nn_n_hfma2_execute_kernel").family,
            "hfma");
}

TEST(KernelClassifier, ArchitectureFromTheName) {
  EXPECT_EQ(sm_from_name("cudnn_generated_fort_native_sdpa_sm100_flash_fprop_f16"), 100);
  EXPECT_EQ(sm_from_name("fmha_cutlassF_f16_aligned_64x64_rf_sm80(Params)"), 80);
  EXPECT_EQ(sm_from_name("CollectiveMma<MainloopSm90TmaGmmaWarpSpecialized<4>>"), 90);
  EXPECT_EQ(sm_from_name("sm_75_kernel"), 75);
  EXPECT_EQ(sm_from_name("volta_sgemm_64x64_nt"), 0);
  EXPECT_EQ(sm_from_name("asm12345 cosm90x"), 0);
}

// Fused attention (memory-efficient FMHA, cuDNN SDPA) needs the architecture: the kernel's own
// sm_XY, else the device's; without either it stays undecided and says why.
TEST(KernelClassifier, FusedAttentionDependsOnTheArchitecture) {
  const char* no_arch =
      "fmha_cutlassB_bf16_aligned_128x128_k128(PyTorchMemEffAttention::"
      "AttentionBackwardKernel<cutlass::bfloat16_t>::Params)";
  const KernelClass unknown = classify_kernel(no_arch);
  EXPECT_EQ(unknown.family, "fmha");
  EXPECT_EQ(unknown.decision, Decision::Unknown);
  EXPECT_TRUE(unknown.needs_capability);
  const KernelClass hopper = classify_kernel(no_arch, ComputeCapability{9, 0});
  EXPECT_EQ(hopper.decision, Decision::ByName);
  EXPECT_TRUE(hopper.tensor_core);
  EXPECT_FALSE(hopper.needs_capability);
  const KernelClass pascal = classify_kernel(no_arch, ComputeCapability{6, 1});
  EXPECT_EQ(pascal.decision, Decision::ByName);
  EXPECT_FALSE(pascal.tensor_core);
  // The kernel's own architecture wins over the device's.
  EXPECT_FALSE(
      classify_kernel("fmha_cutlassF_f16_aligned_32x128_gmem_sm50(Params)", ComputeCapability{9, 0})
          .tensor_core);
  EXPECT_TRUE(classify_kernel("fmha_cutlassF_f16_aligned_64x64_rf_sm75(Params)").tensor_core);
  // fp32 attention: SIMT, or TF32 emulation on sm80; the name does not say which.
  const KernelClass fp32 = classify_kernel(
      "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, "
      "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)");
  EXPECT_EQ(fp32.decision, Decision::Unknown);
  EXPECT_FALSE(fp32.needs_capability);
  EXPECT_FALSE(fp32.tensor_core);
  // cuDNN's SDPA names carry their architecture.
  EXPECT_TRUE(classify_kernel("cudnn_generated_fort_native_sdpa_sm100_flash_bprop_mxfp8_knob_1_"
                              "128x128x128_1x1x1_cga1x1x1_kernel0_0")
                  .tensor_core);
}

TEST(KernelClassifier, PrecisionNames) {
  EXPECT_EQ(precision_name(Precision::TF32), "tf32");
  EXPECT_EQ(precision_name(Precision::BF16), "bf16");
  EXPECT_EQ(precision_name(Precision::Unknown), "unknown");
}

}  // namespace
}  // namespace fathom
