// On a GPU (label gpu; each test skips without one): fathom's device-memory peaks per phase
// against what the allocations imply, and the caching allocator's own statistics (what
// torch.cuda.max_memory_allocated() reads) identical with and without a session.
#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <fathom/fathom.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <ostream>
#include <string>

#include "session_fixture.h"

namespace fathom {
namespace {

using test::SessionTest;
namespace cca = c10::cuda::CUDACachingAllocator;

constexpr std::int64_t MiB = 1 << 20;
constexpr auto kAll = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);

struct UserStats {
  std::int64_t allocated = 0, allocated_peak = 0, reserved = 0, reserved_peak = 0;
  bool operator==(const UserStats&) const = default;
};

std::ostream& operator<<(std::ostream& os, const UserStats& s) {
  return os << "{allocated " << s.allocated << ", peak " << s.allocated_peak << "; reserved "
            << s.reserved << ", peak " << s.reserved_peak << "}";
}

UserStats user_stats() {
  const auto s = cca::getDeviceStats(c10::cuda::current_device());
  return {s.allocated_bytes[kAll].current, s.allocated_bytes[kAll].peak,
          s.reserved_bytes[kAll].current, s.reserved_bytes[kAll].peak};
}

at::Tensor device_bytes(std::int64_t n) {
  return torch::empty({n}, torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA));
}

struct Measured {
  std::int64_t base = 0;  // allocated bytes when the epoch began
  UserStats user;         // the allocator's statistics after the run
  RunReport report;
};

// The same allocations with a session in `mode` (Off: no fathom at all). Every size is a multiple
// of 8 MiB, so each block the allocator hands out is exactly the size asked for (it splits a
// cached block whenever more than 1 MiB would be left, and 0 or >= 8 MiB is left here): the
// peaks below follow from the sizes alone.
Measured run(const std::string& dir, Mode mode) {
  torch::cuda::synchronize();
  cca::emptyCache();
  cca::resetPeakStats(c10::cuda::current_device());  // the test's baseline, as a user takes it
  Measured out;
  {
    Session session(Options().report_dir(dir).print_report(false).mode(mode).cupti(false));
    auto resident = device_bytes(64 * MiB);
    out.base = user_stats().allocated;
    {
      auto e = session.epoch();
      for (int i = 0; i < 3; ++i) {
        { auto batch = device_bytes(128 * MiB); }  // between steps: the loader's batch
        auto step = e.step(1);
        at::Tensor kept;
        {
          auto f = step.forward();
          kept = device_bytes(32 * MiB);
          auto a = device_bytes(32 * MiB);
          auto b = device_bytes(32 * MiB);
        }
        {
          auto b = step.backward();
          auto g = device_bytes(16 * MiB);
          kept.reset();
        }
        {
          auto o = step.optimizer();
          auto u = device_bytes(8 * MiB);
        }
      }
    }
    out.report = session.report();
  }
  torch::cuda::synchronize();
  out.user = user_stats();
  return out;
}

void expect_peaks_follow_the_sizes(const Measured& with) {
  ASSERT_EQ(with.report.epochs.size(), 1u);
  const EpochSummary& e = with.report.epochs[0];
  const std::int64_t base = with.base;
  auto peak = [&](Phase p) -> std::int64_t {
    const auto& m = e.phase(p).device_memory;
    return m ? m->peak_allocated_bytes : -1;
  };
  EXPECT_TRUE(e.phase(Phase::Data).inferred);
  EXPECT_EQ(peak(Phase::Data), base + 128 * MiB);
  EXPECT_EQ(peak(Phase::Forward), base + 96 * MiB);
  EXPECT_EQ(peak(Phase::Backward), base + 48 * MiB);
  EXPECT_EQ(peak(Phase::Optimizer), base + 8 * MiB);
  for (Phase p : {Phase::Data, Phase::Forward, Phase::Backward, Phase::Optimizer}) {
    const auto& m = e.phase(p).device_memory;
    ASSERT_TRUE(m) << phase_name(p);
    EXPECT_GE(m->peak_reserved_bytes, m->peak_allocated_bytes) << phase_name(p);
  }
  ASSERT_TRUE(e.device_memory);
  // Nothing allocated after the epoch began goes beyond it, and the reserve only grows in it.
  EXPECT_EQ(e.device_memory->peak_allocated_bytes, with.user.allocated_peak);
  EXPECT_EQ(e.device_memory->peak_reserved_bytes, with.user.reserved_peak);
}

TEST_F(SessionTest, GpuMemoryPeaksLeaveTheAllocatorsStatisticsAsWithoutFathom) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Measured without = run(dir(), Mode::Off);
  const Measured with = run(dir(), Mode::Observe);
  EXPECT_EQ(without.user.allocated_peak, without.base + 128 * MiB);
  EXPECT_EQ(with.user, without.user);
  expect_peaks_follow_the_sizes(with);
  // A second session in the same process follows the allocator again.
  const Measured again = run(dir(), Mode::Observe);
  EXPECT_EQ(again.user, without.user);
  expect_peaks_follow_the_sizes(again);
}

TEST_F(SessionTest, GpuMemoryPeaksWithExpandableSegments) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Segments grow by mapping pages (SEGMENT_MAP) instead of new cudaMallocs.
  c10::CachingAllocator::setAllocatorSettings("expandable_segments:True");
  const Measured without = run(dir(), Mode::Off);
  const Measured with = run(dir(), Mode::Observe);
  cca::emptyCache();
  c10::CachingAllocator::setAllocatorSettings("expandable_segments:False");
  EXPECT_EQ(with.user, without.user);
  expect_peaks_follow_the_sizes(with);
}

}  // namespace
}  // namespace fathom
