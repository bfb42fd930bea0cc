// The one kernel-name normalizer (kernel_name.h) and the aggregator that calls it: mangled names,
// as CUPTI hands them out on the live path and an Nsight export stores them, classify as their
// demangled names do, and every name costs at most its bounded prefix.
#include "base/kernel_name.h"

#include <gtest/gtest.h>

#include <string>

#include "aggregate/gpu_aggregator.h"
#include "aggregate/kernel_classifier.h"

namespace fathom {
namespace {

struct NamePair {
  const char* mangled;
  const char* demangled;  // as Nsight Systems wrote it (demangledName): "(int)128", "[lambda...]"
};

// Every kernel of the two H100 exports in tests/data/traces (nsys_mfu_2gpu_before.sqlite and
// _after.sqlite) whose mangledName differs from its demangledName, from their StringIds table:
//   SELECT DISTINCT m.value, d.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
//   JOIN StringIds m ON m.id = k.mangledName JOIN StringIds d ON d.id = k.demangledName
const NamePair kExportNames[] = {
    {"_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE",
     "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)"},
    {"_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7MeanOpsIffffEEjfLi4ELi4EEEEEv"
     "T1_",
     "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, "
     "at::native::MeanOps<float, float, float, float>, unsigned int, float, (int)4, "
     "(int)4>>(T3)"},
    {"_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastINS0_13BinaryFu"
     "nctorIfffNS0_15binary_internal10MulFunctorIfEEEEEEvRNS_18TensorIteratorBaseERKT_EUliE_EE"
     "viT1_",
     "void at::native::elementwise_kernel<(int)128, (int)2, void "
     "at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, "
     "at::native::binary_internal::MulFunctor<float>>>(at::TensorIteratorBase &, const T1 "
     "&)::[lambda(int) (instance 1)]>(int, T3)"},
    {"_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastINS0_15CUDAFunc"
     "tor_addIfEEEEvRNS_18TensorIteratorBaseERKT_EUliE_EEviT1_",
     "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_n"
     "ocast<at::native::CUDAFunctor_add<float>>(at::TensorIteratorBase &, const T1 "
     "&)::[lambda(int) (instance 1)]>(int, T3)"},
    {"_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastIZZZNS0_15neg_k"
     "ernel_cudaERNS_18TensorIteratorBaseEENKUlvE0_clEvENKUlvE5_clEvEUlfE_EEvS4_RKT_EUliE_EEvi"
     "T1_",
     "void at::native::elementwise_kernel<(int)128, (int)2, void "
     "at::native::gpu_kernel_impl_nocast<at::native::neg_kernel_cuda(at::TensorIteratorBase "
     "&)::[lambda() (instance 2)]::operator ()() const::[lambda() (instance 7)]::operator ()()"
     " const::[lambda(float) (instance 1)]>(at::TensorIteratorBase &, const T1 "
     "&)::[lambda(int) (instance 1)]>(int, T3)"},
    {"_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastIZZZNS0_23direc"
     "t_copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_clEvENKUlvE5_clEvEUlfE_EEvS4_RKT_EU"
     "liE_EEviT1_",
     "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_n"
     "ocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance"
     " 3)]::operator ()() const::[lambda() (instance 7)]::operator ()() const::[lambda(float) "
     "(instance 1)]>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, "
     "T3)"},
    {"_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_15gpu_kernel_implINS0_13BinaryFunctorIf"
     "ffNS0_15binary_internal10MulFunctorIfEEEEEEvRNS_18TensorIteratorBaseERKT_EUliE_EEviT1_",
     "void at::native::elementwise_kernel<(int)128, (int)4, void "
     "at::native::gpu_kernel_impl<at::native::BinaryFunctor<float, float, float, "
     "at::native::binary_internal::MulFunctor<float>>>(at::TensorIteratorBase &, const T1 "
     "&)::[lambda(int) (instance 1)]>(int, T3)"},
    {"_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_15gpu_kernel_implINS0_15CUDAFunctor_add"
     "IfEEEEvRNS_18TensorIteratorBaseERKT_EUliE_EEviT1_",
     "void at::native::elementwise_kernel<(int)128, (int)4, void "
     "at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<float>>(at::TensorIteratorBase "
     "&, const T1 &)::[lambda(int) (instance 1)]>(int, T3)"},
    {"_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_22gpu_kernel_impl_nocastINS0_13BinaryFu"
     "nctorIN3c108BFloat16ES5_S5_NS0_15binary_internal10MulFunctorIfEEEEEEvRNS_18TensorIterato"
     "rBaseERKT_EUliE_EEviT1_",
     "void at::native::elementwise_kernel<(int)128, (int)4, void "
     "at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<c10::BFloat16, "
     "c10::BFloat16, c10::BFloat16, "
     "at::native::binary_internal::MulFunctor<float>>>(at::TensorIteratorBase &, const T1 "
     "&)::[lambda(int) (instance 1)]>(int, T3)"},
    {"_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_22gpu_kernel_impl_nocastIZZZNS0_23direc"
     "t_copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_clEvENKUlvE10_clEvEUlN3c108BFloat16"
     "EE_EEvS4_RKT_EUliE_EEviT1_",
     "void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl_n"
     "ocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance"
     " 3)]::operator ()() const::[lambda() (instance 12)]::operator ()() "
     "const::[lambda(c10::BFloat16) (instance 1)]>(at::TensorIteratorBase &, const T1 "
     "&)::[lambda(int) (instance 1)]>(int, T3)"},
    {"_ZN2at6native27unrolled_elementwise_kernelINS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EELi4E"
     "23TrivialOffsetCalculatorILi2EjES7_ILi1EjENS0_6memory12LoadWithCastILi2EEENSA_13StoreWit"
     "hCastILi1EEEEEviT_T0_T2_T3_T4_T5_",
     "void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctor_add<float>, "
     "std::array<char *, (unsigned long)3>, (int)4, TrivialOffsetCalculator<(int)2, unsigned "
     "int>, TrivialOffsetCalculator<(int)1, unsigned int>, "
     "at::native::memory::LoadWithCast<(int)2>, "
     "at::native::memory::StoreWithCast<(int)1>>(int, T1, T2, T4, T5, T6, T7)"},
    {"_ZN2at6native27unrolled_elementwise_kernelINS0_21CUDAFunctorOnSelf_addIfEESt5arrayIPcLm2"
     "EELi4E23TrivialOffsetCalculatorILi1EjES8_NS0_6memory12LoadWithCastILi1EEENS9_13StoreWith"
     "CastILi1EEEEEviT_T0_T2_T3_T4_T5_",
     "void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctorOnSelf_add<float>, "
     "std::array<char *, (unsigned long)2>, (int)4, TrivialOffsetCalculator<(int)1, unsigned "
     "int>, TrivialOffsetCalculator<(int)1, unsigned int>, "
     "at::native::memory::LoadWithCast<(int)1>, "
     "at::native::memory::StoreWithCast<(int)1>>(int, T1, T2, T4, T5, T6, T7)"},
    {"_ZN2at6native27unrolled_elementwise_kernelIZZZNS0_23direct_copy_kernel_cudaERNS_18Tensor"
     "IteratorBaseEENKUlvE1_clEvENKUlvE5_clEvEUlfE_St5arrayIPcLm2EELi4E23TrivialOffsetCalculat"
     "orILi1EjESB_NS0_6memory12LoadWithCastILi1EEENSC_13StoreWithCastILi1EEEEEviT_T0_T2_T3_T4_"
     "T5_",
     "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::Ten"
     "sorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda() (instance "
     "7)]::operator ()() const::[lambda(float) (instance 1)], std::array<char *, (unsigned "
     "long)2>, (int)4, TrivialOffsetCalculator<(int)1, unsigned int>, "
     "TrivialOffsetCalculator<(int)1, unsigned int>, at::native::memory::LoadWithCast<(int)1>,"
     " at::native::memory::StoreWithCast<(int)1>>(int, T1, T2, T4, T5, T6, T7)"},
    {"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3"
     "EEEEviT0_T1_",
     "void at::native::vectorized_elementwise_kernel<(int)4, "
     "at::native::CUDAFunctor_add<float>, std::array<char *, (unsigned long)3>>(int, T2, T3)"},
    {"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_21CUDAFunctorOnSelf_addIfEESt5array"
     "IPcLm2EEEEviT0_T1_",
     "void at::native::vectorized_elementwise_kernel<(int)4, "
     "at::native::CUDAFunctorOnSelf_add<float>, std::array<char *, (unsigned long)2>>(int, T2,"
     " T3)"},
    {"_ZN2at6native29vectorized_elementwise_kernelILi4EZNS0_51_GLOBAL__N__b1108092_12_PowKerne"
     "l_cu_398dda3b_2224229pow_tensor_scalar_kernel_implIffEEvRNS_18TensorIteratorBaseET0_EUlf"
     "E_St5arrayIPcLm2EEEEviS6_T1_",
     "void at::native::vectorized_elementwise_kernel<(int)4, void "
     "at::native::<unnamed>::pow_tensor_scalar_kernel_impl<float, "
     "float>(at::TensorIteratorBase &, T2)::[lambda(float) (instance 1)], std::array<char *, "
     "(unsigned long)2>>(int, T2, T3)"},
    {"_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_17rsqrt_kernel_cudaERNS_18Tensor"
     "IteratorBaseEENKUlvE0_clEvENKUlvE0_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_",
     "void at::native::vectorized_elementwise_kernel<(int)4, "
     "at::native::rsqrt_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance "
     "2)]::operator ()() const::[lambda() (instance 2)]::operator ()() const::[lambda(float) "
     "(instance 1)], std::array<char *, (unsigned long)2>>(int, T2, T3)"},
    {"_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_15CUDAFunctor_addIN3c108BFloat16EEE"
     "St5arrayIPcLm3EEEEviT0_T1_",
     "void at::native::vectorized_elementwise_kernel<(int)8, "
     "at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char *, (unsigned long)3>>(int, "
     "T2, T3)"},
    {"_ZN2at6native29vectorized_elementwise_kernelILi8EZNS0_25bfloat16_copy_kernel_cudaERNS_18"
     "TensorIteratorBaseEEUlfE_St5arrayIPcLm2EEEEviT0_T1_",
     "void at::native::vectorized_elementwise_kernel<(int)8, "
     "at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda(float) "
     "(instance 1)], std::array<char *, (unsigned long)2>>(int, T2, T3)"},
    {"_ZN2at6native29vectorized_elementwise_kernelILi8EZZZNS0_18GeluCUDAKernelImplERNS_18Tenso"
     "rIteratorBaseENS0_8GeluTypeEENKUlvE_clEvENKUlvE2_clEvEUlN3c108BFloat16EE_St5arrayIPcLm2E"
     "EEEviT0_T1_",
     "void at::native::vectorized_elementwise_kernel<(int)8, "
     "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase &, "
     "at::native::GeluType)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance"
     " 4)]::operator ()() const::[lambda(c10::BFloat16) (instance 1)], std::array<char *, "
     "(unsigned long)2>>(int, T2, T3)"},
    {"_ZN2at6native40_GLOBAL__N__0f1a8107_8_Shape_cu_49f7391c30CatArrayBatchedCopy_vectorizedI"
     "NS1_10OpaqueTypeILj2EEEjLi1ELi128ELi1ELi16ELi8EEEvPcNS1_25CatArrInputTensorMetadataIT_T0"
     "_XT2_EXT3_EEENS1_16TensorSizeStrideIS8_Lj4EEEiS8_",
     "void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<at::native::<unnamed>::Opaque"
     "Type<(unsigned int)2>, unsigned int, (int)1, (int)128, (int)1, (int)16, (int)8>(char *, "
     "at::native::<unnamed>::CatArrInputTensorMetadata<T1, T2, T4, T5>, "
     "at::native::<unnamed>::TensorSizeStride<T2, (unsigned int)4>, int, T2)"},
    {"_ZN2at6native40_GLOBAL__N__0f1a8107_8_Shape_cu_49f7391c30CatArrayBatchedCopy_vectorizedI"
     "NS1_10OpaqueTypeILj2EEEjLi2ELi128ELi1ELi16ELi8EEEvPcNS1_25CatArrInputTensorMetadataIT_T0"
     "_XT2_EXT3_EEENS1_16TensorSizeStrideIS8_Lj4EEEiS8_",
     "void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<at::native::<unnamed>::Opaque"
     "Type<(unsigned int)2>, unsigned int, (int)2, (int)128, (int)1, (int)16, (int)8>(char *, "
     "at::native::<unnamed>::CatArrInputTensorMetadata<T1, T2, T4, T5>, "
     "at::native::<unnamed>::TensorSizeStride<T2, (unsigned int)4>, int, T2)"},
    {"_ZN2at6native53_GLOBAL__N__21739cd4_20_layer_norm_kernel_cu_9c5ada8a28vectorized_layer_n"
     "orm_kernelIffLb0EEEviT0_PKT_S6_S6_PS3_S7_PS4_",
     "void at::native::<unnamed>::vectorized_layer_norm_kernel<float, float, (bool)0>(int, T2,"
     " const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)"},
    {"_ZN5flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsILi128ELi128ELi64ELi4ELb0ELb0EN7cut"
     "lass10bfloat16_tE19Flash_kernel_traitsILi128ELi128ELi64ELi4ES3_EELb0ELb0ELb0ELb0ELb0ELb1"
     "ELb0ELb0EEEvNS_16Flash_fwd_paramsE",
     "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, "
     "(int)4, (bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, "
     "(int)64, (int)4, cutlass::bfloat16_t>>, (bool)0, (bool)0, (bool)0, (bool)0, (bool)0, "
     "(bool)1, (bool)0, (bool)0>(flash::Flash_fwd_params)"},
};

// The kernel row a single record with this name lands in, through the aggregator (the path every
// source's records take).
KernelStats row_of(const std::string& name, std::uint64_t name_key = 0) {
  GpuActivity a;
  KernelRecord& k = a.kernels.emplace_back();
  k.name = name;
  k.name_key = name_key;
  k.start_ns = 1000;
  k.end_ns = 2000;
  const GpuAggregate g = aggregate(a);
  EXPECT_EQ(g.kernels.size(), 1u);
  return g.kernels.empty() ? KernelStats{} : g.kernels.front();
}

void expect_same_class(const KernelClass& got, const KernelClass& want, const std::string& what) {
  EXPECT_EQ(got.family, want.family) << what;
  EXPECT_EQ(got.tensor_core, want.tensor_core) << what;
  EXPECT_EQ(got.communication, want.communication) << what;
  EXPECT_EQ(got.decision, want.decision) << what;
  EXPECT_EQ(got.precision, want.precision) << what << ": got " << precision_name(got.precision)
                                           << ", want " << precision_name(want.precision);
}

TEST(KernelName, ExportMangledNamesClassifyAsTheirDemangledNames) {
  for (const NamePair& p : kExportNames) {
    const KernelStats row = row_of(p.mangled, /*name_key=*/1);
    expect_same_class(row.kind, classify_kernel(p.demangled), p.mangled);
    // The row shows the demangled name, as a Kineto trace of the same run would.
    EXPECT_NE(row.name.substr(0, 2), "_Z") << p.mangled;
  }
}

TEST(KernelName, PyTorchKernelsAreNotUnknownWhenMangled) {
  // The namespace rows the issue names (at::native::) must match a mangled name too.
  const KernelStats add = row_of(
      "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3E"
      "EEEviT0_T1_");
  EXPECT_EQ(add.kind.family, "elementwise");
  EXPECT_EQ(add.kind.decision, Decision::ByName);
  EXPECT_EQ(add.kind.precision, Precision::FP32);
  EXPECT_EQ(add.name,
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, "
            "3ul>)");
  // amp_update_scale takes its growth factors as doubles; its data is float.
  const KernelStats amp = row_of("_ZN2at6native28amp_update_scale_cuda_kernelEPfPiPKfddi");
  EXPECT_EQ(amp.kind.family, "aten_native");
  EXPECT_EQ(amp.kind.decision, Decision::ByName);
  EXPECT_EQ(amp.kind.precision, Precision::FP32);
}

// PyTorch's fused Adam (FusedAdamKernel.cu): the kernel's variadic arguments are the lr, betas,
// weight decay and eps as double scalars. Mangled names as the Itanium ABI writes this
// declaration (g++ -S of the same templates), and Kineto's demangled form of the float one.
TEST(KernelName, FusedOptimizerPrecisionComesFromItsElementTypeNotItsDoubleScalars) {
  const KernelStats f32 = row_of(
      "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_32FusedOptimizerTensorListMeta"
      "dataILi4EEENS1_20FusedAdamMathFunctorIfLi4ELNS0_9ADAM_MODEE1ELb0EEEJPddddddbPKfSA_EEEvT_T"
      "0_DpT1_");
  EXPECT_EQ(f32.kind.family, "aten_native");
  EXPECT_EQ(f32.kind.precision, Precision::FP32) << precision_name(f32.kind.precision);
  const KernelStats bf16 = row_of(
      "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_32FusedOptimizerTensorListMeta"
      "dataILi4EEENS1_20FusedAdamMathFunctorIN3c108BFloat16ELi4ELNS0_9ADAM_MODEE1ELb0EEEJPdddddd"
      "bPKfSC_EEEvT_T0_DpT1_");
  EXPECT_EQ(bf16.kind.precision, Precision::BF16) << precision_name(bf16.kind.precision);
  EXPECT_EQ(classify_kernel(f32.name).precision, Precision::FP32);
  // A kernel of doubles only is fp64.
  EXPECT_EQ(
      precision_from_name("void at::native::vectorized_elementwise_kernel<4, "
                          "at::native::CUDAFunctor_add<double>, std::array<char*, 3ul> >"
                          "(int, at::native::CUDAFunctor_add<double>, std::array<char*, 3ul>)"),
      Precision::FP64);
  // Scalar parameters say nothing once template arguments named the types.
  EXPECT_EQ(precision_from_name("void k<4>(double, double)"), Precision::Unknown);
}

TEST(KernelName, WithoutParametersKeepsWhatTheTemplateArgumentsSay) {
  EXPECT_EQ(without_parameters("void k<float, 4>(int, double)"), "void k<float, 4>");
  EXPECT_EQ(without_parameters("void f<(int)128, void g<A>(B &, const T1 &)::[lambda(int) "
                               "(instance 1)]>(int, T3)"),
            "void f<(int)128, void g<A>(B &, const T1 &)::[lambda(int) (instance 1)]>");
  // No template arguments: the parameters are all the name says.
  EXPECT_EQ(without_parameters("sgemm_kernel(float*, int)"), "sgemm_kernel(float*, int)");
  EXPECT_EQ(without_parameters("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"),
            "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN");
  EXPECT_EQ(without_parameters("k(a))"), "k(a))");
  EXPECT_EQ(without_parameters(")"), ")");
}

TEST(KernelName, NamesThatAreNotMangledAreKeptAsTheyAre) {
  EXPECT_EQ(normalize_kernel_name("nvjet_tst_96x64_64x10_1x2_h_bz_bias_TNN"),
            "nvjet_tst_96x64_64x10_1x2_h_bz_bias_TNN");
  EXPECT_EQ(normalize_kernel_name("_Znot a mangled name"), "_Znot a mangled name");
  EXPECT_EQ(normalize_kernel_name("_Z"), "_Z");
  EXPECT_EQ(normalize_kernel_name(""), "");
}

TEST(KernelName, OneMangledNameIsOneRowWhateverItsKey) {
  // Records of one kernel, with and without CUPTI's name key, and its Kineto spelling: one row.
  const std::string mangled = kExportNames[1].mangled;
  GpuActivity a;
  for (std::uint64_t key : {0ull, 7ull, 7ull, 9ull}) {
    KernelRecord& k = a.kernels.emplace_back();
    k.name = mangled;
    k.name_key = key;
    k.start_ns = 1000 * static_cast<std::int64_t>(a.kernels.size());
    k.end_ns = k.start_ns + 10;
  }
  // Key 7 reused for another name: another row, never the first one's.
  KernelRecord& other = a.kernels.emplace_back();
  other.name = "nvjet_tst_96x64_64x10_1x2_h_bz_bias_TNN";
  other.name_key = 7;
  other.start_ns = 9000;
  other.end_ns = 9010;
  const GpuAggregate g = aggregate(a);
  ASSERT_EQ(g.kernels.size(), 2u);
  EXPECT_EQ(g.kernels[0].count, 4);
  EXPECT_EQ(g.kernels[1].count, 1);
  EXPECT_EQ(g.kernels[1].name, other.name);
}

// Issue 25: a 30 MB name cost 39 s to classify. Names are classified and interned on their first
// kKernelNameBytes: two huge names that share that prefix are one row, shown cut.
TEST(KernelName, HugeNamesAreClassifiedAndInternedOnTheirPrefix) {
  GpuActivity a;
  for (char tail : {'a', 'b'}) {
    KernelRecord& k = a.kernels.emplace_back();
    k.name = "void at::native::reduce_kernel<512, 1>" + std::string(std::size_t{8} << 20, 'x');
    k.name += tail;
    k.start_ns = tail == 'a' ? 0 : 100;
    k.end_ns = k.start_ns + 50;
  }
  const GpuAggregate g = aggregate(a);
  ASSERT_EQ(g.kernels.size(), 1u);
  EXPECT_EQ(g.kernels[0].count, 2);
  EXPECT_EQ(g.kernels[0].name.size(), kKernelNameBytes);
  EXPECT_EQ(g.kernels[0].kind.family, "reduction");
  // A mangled name cut by the prefix does not demangle, and is kept (cut) as it is.
  const std::string long_mangled = "_ZN2at6native" + std::string(10000, '1');
  EXPECT_EQ(normalize_kernel_name(long_mangled), long_mangled.substr(0, kKernelNameBytes));
}

}  // namespace
}  // namespace fathom
