#include <fathom/fathom.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "session_fixture.h"

namespace fathom {
namespace {

using test::SessionTest;

TEST_F(SessionTest, ToDeviceOnTheSameDeviceCopiesNothingAndRecordsNothing) {
  Session session(Options().report_dir(dir()).print_report(false));
  auto t = torch::randn({16, 16});
  {
    auto e = session.epoch();
    auto step = e.step(16);
    auto same = step.to_device(t, torch::kCPU);
    EXPECT_TRUE(same.is_same(t));  // exactly what t.to(kCPU) returns
  }
  const EpochSummary& e = session.report().epochs.at(0);
  EXPECT_TRUE(e.copies.empty());
  EXPECT_EQ(e.phase(Phase::Copy).count, 1);
}

TEST_F(SessionTest, ToDeviceWithFathomOffIsPlainTo) {
  Session session(Options().report_dir(dir()).mode(Mode::Off));
  auto e = session.epoch();
  auto step = e.step(1);
  auto t = torch::ones({3});
  EXPECT_TRUE(step.to_device(t, torch::kCPU).equal(t));
}

// --- on a GPU ---------------------------------------------------------------------------------

TEST_F(SessionTest, GpuCopiesRecordBytesPinnedAndDirection) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Session session(Options().report_dir(dir()).print_report(false));
  auto pageable = torch::randn({1024, 256});  // 1 MiB
  auto pinned = torch::randn({512, 256}).pin_memory();
  {
    auto e = session.epoch();
    auto step = e.step(1);
    auto a = step.to_device(pageable, torch::kCUDA);
    auto b = step.to_device(pinned, torch::kCUDA, /*non_blocking=*/true);
    auto c = step.to_device(a, torch::kCPU);
  }
  const EpochSummary& e = session.report().epochs.at(0);
  ASSERT_EQ(e.copies.size(), 3u);
  EXPECT_EQ(e.copies[0].direction, CopyDirection::HostToDevice);
  EXPECT_FALSE(e.copies[0].pinned);
  EXPECT_EQ(e.copies[0].bytes, 1024 * 256 * 4);
  EXPECT_TRUE(e.copies[1].pinned);
  EXPECT_TRUE(e.copies[1].non_blocking);
  EXPECT_EQ(e.copies[1].bytes, 512 * 256 * 4);
  EXPECT_EQ(e.copies[2].direction, CopyDirection::DeviceToHost);
  const PhaseSummary& copy = e.phase(Phase::Copy);
  ASSERT_TRUE(copy.device_ms_total.has_value());
  EXPECT_GT(*copy.device_ms_total, 0);
}

TEST_F(SessionTest, GpuPhasesHaveDeviceTimeAndAllocatorPeaks) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Session session(Options().report_dir(dir()).print_report(false));
  {
    auto e = session.epoch();
    for (int i = 0; i < 3; ++i) {
      auto step = e.step(1);
      auto f = step.forward();
      auto a = torch::randn({2048, 2048}, torch::kCUDA);  // 16 MiB
      auto b = torch::mm(a, a);
    }
  }
  const EpochSummary& e = session.report().epochs.at(0);
  const PhaseSummary& fwd = e.phase(Phase::Forward);
  ASSERT_TRUE(fwd.device_ms_total.has_value());
  EXPECT_GT(*fwd.device_ms_total, 0);
  ASSERT_TRUE(fwd.device_memory.has_value());
  EXPECT_GE(fwd.device_memory->peak_allocated_bytes, 2 * 2048 * 2048 * 4);
  ASSERT_TRUE(session.report().environment.device_memory_bytes.has_value());
}

}  // namespace
}  // namespace fathom
