// NVML on a machine with a GPU (ctest label gpu): the real driver library answers.
#include <gtest/gtest.h>

#include <iostream>

#include "collect/clock.h"
#include "collect/telemetry_sampler.h"

namespace fathom {
namespace {

// On a machine with a GPU: the real driver library answers.
TEST(NvmlTelemetryGpu, RealDriverLibrary) {
  NvmlOpenResult r = open_nvml_telemetry();
  if (!r.source) GTEST_SKIP() << "no NVML here: " << r.not_measured.at(0).why;
  const DeviceLimits l = r.source->limits();
  EXPECT_FALSE(l.name.empty());
  const TelemetrySample s = r.source->read(now_ns());
  ASSERT_TRUE(s.memory_total_bytes.has_value());
  EXPECT_GT(*s.memory_total_bytes, 1LL << 30);
  ASSERT_TRUE(s.power_w.has_value());
  EXPECT_GT(*s.power_w, 1.0);
  for (const Unmeasured& u : r.source->unsupported()) std::cout << u.what << ": " << u.why << "\n";
}

}  // namespace
}  // namespace fathom
