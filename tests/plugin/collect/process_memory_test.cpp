#include "collect/process_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace fathom {
namespace {

TEST(ProcessMemory, ResidentMemoryGrowsWhenPagesAreTouched) {
  auto before = current_rss_bytes();
  ASSERT_TRUE(before.has_value());
  constexpr std::size_t kBytes = 64 << 20;
  std::unique_ptr<char[]> block(new char[kBytes]);
  std::memset(block.get(), 1, kBytes);
  auto after = current_rss_bytes();
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after - *before, static_cast<std::int64_t>(kBytes) * 9 / 10);
  auto peak = peak_rss_bytes();
  ASSERT_TRUE(peak.has_value());
  EXPECT_GE(*peak, *after);
  block.reset();
}

TEST(ProcessMemory, PeakResetsToCurrent) {
  {
    constexpr std::size_t kBytes = 64 << 20;
    std::unique_ptr<char[]> block(new char[kBytes]);
    std::memset(block.get(), 1, kBytes);
  }
  auto high = peak_rss_bytes();
  if (!reset_peak_rss()) GTEST_SKIP() << "/proc/self/clear_refs not writable here";
  auto low = peak_rss_bytes();
  ASSERT_TRUE(high && low);
  EXPECT_LT(*low, *high);
}

}  // namespace
}  // namespace fathom
