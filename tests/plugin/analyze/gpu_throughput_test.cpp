#include "analyze/gpu_throughput.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

TEST(GpuThroughput, PicksTheRowByNameWithinTheComputeCapability) {
  const GpuThroughput* h200 = find_gpu_throughput("NVIDIA H200", 9, 0);
  ASSERT_NE(h200, nullptr);
  EXPECT_EQ(h200->name, "H100 SXM / H200");
  const GpuThroughput* pcie = find_gpu_throughput("NVIDIA H100 PCIe", 9, 0);
  ASSERT_NE(pcie, nullptr);
  EXPECT_EQ(pcie->name, "H100 PCIe");
  // "A10" is a substring of "A100": the compute capability keeps them apart.
  EXPECT_EQ(find_gpu_throughput("NVIDIA A100-SXM4-80GB", 8, 0)->name, "A100 SXM");
  EXPECT_EQ(find_gpu_throughput("NVIDIA A10", 8, 6)->name, "A10");
  EXPECT_EQ(find_gpu_throughput("NVIDIA L4", 8, 9)->name, "L4");
  EXPECT_EQ(find_gpu_throughput("NVIDIA L40S", 8, 9)->name, "L40S");
}

TEST(GpuThroughput, UnknownNameFallsBackToTheComputeCapabilityAndUnknownCcToNothing) {
  EXPECT_EQ(find_gpu_throughput("Some Ampere card", 8, 0)->name, "A100 SXM");
  EXPECT_EQ(find_gpu_throughput("Some card", 6, 1), nullptr);
}

TEST(GpuThroughput, RatioUsesBf16FromAmpereAndFp16Before) {
  EXPECT_NEAR(low_precision_ratio(*find_gpu_throughput("A100", 8, 0)), 312 / 19.5, 1e-9);
  EXPECT_NEAR(low_precision_ratio(*find_gpu_throughput("Tesla V100-SXM2-16GB", 7, 0)), 125 / 15.7,
              1e-9);
  EXPECT_TRUE(cuda_supports_bf16(8));
  EXPECT_FALSE(cuda_supports_bf16(7));
}

TEST(GpuThroughput, SpeedupBoundIsAmdahl) {
  EXPECT_DOUBLE_EQ(speedup_bound(0.0, 16), 1.0);
  EXPECT_DOUBLE_EQ(speedup_bound(1.0, 16), 16.0);
  EXPECT_NEAR(speedup_bound(0.5, 16), 1.0 / (0.5 + 0.5 / 16), 1e-12);
}

}  // namespace
}  // namespace fathom
