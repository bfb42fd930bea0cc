// Where Auto mode may try 16-bit autocast (issue 24): the host's bf16 units less what the
// process's oneDNN and ATen caps take away, and GPUs with Tensor Cores.
#include "analyze/amp_hardware.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

using Units = std::vector<std::string>;
const Units kBoth{"amx_bf16", "avx512_bf16"};

TEST(AmpHardware, NoCapLeavesEveryUnit) {
  std::string why = "x";
  EXPECT_EQ(usable_cpu_bf16_units(kBoth, "", "AVX512", &why), kBoth);
  EXPECT_EQ(why, "");
  EXPECT_EQ(usable_cpu_bf16_units(kBoth, "ALL", "", &why), kBoth);
  EXPECT_EQ(usable_cpu_bf16_units(kBoth, "no such isa", "AVX512"), kBoth);  // oneDNN ignores it
  EXPECT_EQ(usable_cpu_bf16_units({}, "", "AVX512"), Units{});
}

// The issue 28 host had neither unit; a host with them under ONEDNN_MAX_CPU_ISA=AVX2 or
// ATEN_CPU_CAPABILITY=avx2 runs the same kernels as that host and must decide the same.
TEST(AmpHardware, OneDnnAndAtenCapsTakeUnitsAway) {
  std::string why;
  EXPECT_EQ(usable_cpu_bf16_units(kBoth, "AVX2", "AVX512", &why), Units{});
  EXPECT_EQ(why, "ONEDNN_MAX_CPU_ISA=AVX2");
  EXPECT_EQ(usable_cpu_bf16_units(kBoth, "avx512_core_bf16", "AVX512", &why),
            Units{"avx512_bf16"});  // any case, as oneDNN reads it
  EXPECT_EQ(why, "ONEDNN_MAX_CPU_ISA=avx512_core_bf16");
  EXPECT_EQ(usable_cpu_bf16_units(kBoth, "AVX512_CORE_AMX", "AVX512"), kBoth);
  EXPECT_EQ(usable_cpu_bf16_units(kBoth, "AVX512_CORE_VNNI", "AVX512"), Units{});
  EXPECT_EQ(usable_cpu_bf16_units(kBoth, "", "AVX2", &why), Units{});
  EXPECT_EQ(why, "ATen's CPU capability AVX2 (ATEN_CPU_CAPABILITY)");
  EXPECT_EQ(usable_cpu_bf16_units(kBoth, "", "DEFAULT"), Units{});
}

TEST(AmpHardware, ACpuWithoutUsableUnitsIsNotNativeAndSaysWhy) {
  AmpDeviceFacts cpu;
  EXPECT_NE(amp_not_native(cpu, false).value_or("").find("lists no bf16 units"), std::string::npos);
  cpu.cpu_bf16_limit = "ONEDNN_MAX_CPU_ISA=AVX2";
  EXPECT_NE(amp_not_native(cpu, false).value_or("").find("ONEDNN_MAX_CPU_ISA=AVX2"),
            std::string::npos);
  cpu.cpu_bf16_units = {"avx512_bf16"};
  EXPECT_EQ(amp_not_native(cpu, false), std::nullopt);
}

TEST(AmpHardware, GpusWithTensorCoresAreNative) {
  AmpDeviceFacts gpu;
  gpu.cuda = true;
  gpu.device_name = "Tesla P100";
  gpu.compute_major = 6;
  EXPECT_NE(amp_not_native(gpu, true).value_or("").find("no Tensor Cores"), std::string::npos);
  for (int major : {0, 7, 8, 9}) {
    gpu.compute_major = major;
    EXPECT_EQ(amp_not_native(gpu, true), std::nullopt) << major;
  }
}

}  // namespace
}  // namespace fathom
