#include "collect/host_info.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fathom {
namespace {

using Units = std::vector<std::string>;

TEST(HostInfo, Bf16UnitsFromTheFlagsLine) {
  // Flags as a Sapphire Rapids guest lists them (shortened), then a second core's copy.
  const std::string cpuinfo =
      "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n"
      "flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
      "bugs\t\t: spectre_v1\n\nprocessor\t: 1\nflags\t\t: fpu\n";
  EXPECT_EQ(cpu_bf16_units(cpuinfo), (Units{"amx_bf16", "avx512_bf16"}));
}

TEST(HostInfo, Bf16UnitsNeedTheWholeFlag) {
  EXPECT_EQ(cpu_bf16_units("flags\t: fpu avx512f avx512_bf16x amx_bf16_\n"), Units{});
  EXPECT_EQ(cpu_bf16_units("flags\t: fpu avx512_bf16\n"), Units{"avx512_bf16"});
  EXPECT_EQ(cpu_bf16_units("flags\t: avx512_bf16"), Units{"avx512_bf16"});  // no newline at end
}

TEST(HostInfo, NoFlagsLineMeansNoUnits) {
  EXPECT_EQ(cpu_bf16_units(""), Units{});
  EXPECT_EQ(cpu_bf16_units("processor\t: 0\nmodel name\t: x\n"), Units{});
}

TEST(HostInfo, ThisMachineAnswersWithoutThrowing) {
  for (const std::string& u : cpu_bf16_units()) EXPECT_TRUE(u == "amx_bf16" || u == "avx512_bf16");
}

}  // namespace
}  // namespace fathom
