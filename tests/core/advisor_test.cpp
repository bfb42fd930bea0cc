#include <fathom/advisor.h>

#include <gtest/gtest.h>

#include <algorithm>

namespace fathom {
namespace {

EpochSummary epoch_with(double step_ms_total, double data_ms_total, std::int64_t steps = 10) {
  EpochSummary e;
  for (Phase p : kAllPhases) e.phases[static_cast<std::size_t>(p)].phase = p;
  e.steps = steps;
  e.step_ms_total = step_ms_total;
  auto& data = e.phases[static_cast<std::size_t>(Phase::Data)];
  data.count = steps;
  data.inferred = true;
  data.wall_ms_total = data_ms_total;
  // Everything inside the step is in forward, so the unaccounted rule stays quiet.
  auto& fwd = e.phases[static_cast<std::size_t>(Phase::Forward)];
  fwd.count = steps;
  fwd.wall_ms_total = step_ms_total;
  return e;
}

const Finding* find(const std::vector<Finding>& fs, const std::string& id) {
  auto it = std::find_if(fs.begin(), fs.end(), [&](const Finding& f) { return f.id == id; });
  return it == fs.end() ? nullptr : &*it;
}

TEST(Advisor, DataWaitAboveFivePercentFires) {
  auto fs = advise(epoch_with(900, 100), Environment{});  // 10 % of step + data
  const Finding* f = find(fs, "data.loader_bound");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(*f->gain_fraction, 0.10, 1e-9);
  EXPECT_EQ(f->evidence.at(0).value, "10.0 %");
  EXPECT_FALSE(f->fix.empty());
  EXPECT_FALSE(f->applied);
}

TEST(Advisor, DataWaitBelowFivePercentDoesNot) {
  auto fs = advise(epoch_with(1000, 40), Environment{});  // 3.8 %
  EXPECT_EQ(find(fs, "data.loader_bound"), nullptr);
}

TEST(Advisor, PageableCopyFiresPinnedDoesNot) {
  EpochSummary e = epoch_with(1000, 0);
  e.copies.push_back(CopySummary{CopyDirection::HostToDevice, true, true, 5, 5 << 20, 1.0});
  EXPECT_EQ(find(advise(e, Environment{}), "copy.pageable"), nullptr);
  e.copies.push_back(CopySummary{CopyDirection::HostToDevice, false, true, 5, 5 << 20, 1.0});
  EXPECT_NE(find(advise(e, Environment{}), "copy.pageable"), nullptr);
}

TEST(Advisor, LargeSynchronousCopiesFireSmallOnesDoNot) {
  EpochSummary e = epoch_with(1000, 0);
  e.copies.push_back(CopySummary{CopyDirection::HostToDevice, true, false, 10, 10 * 1024, 1.0});
  EXPECT_EQ(find(advise(e, Environment{}), "copy.synchronous"), nullptr);  // 1 KiB each
  e.copies[0].bytes = 10 * (1 << 20);
  const Finding* f = find(advise(e, Environment{}), "copy.synchronous");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(*f->gain_fraction, 0.001, 1e-9);
}

TEST(Advisor, MemoryNearCapacity) {
  EpochSummary e = epoch_with(1000, 0);
  Environment env;
  env.device_memory_bytes = 1000;
  e.device_memory = DeviceMemoryPeak{800, 850, 0, 0};
  EXPECT_EQ(find(advise(e, env), "memory.near_capacity"), nullptr);
  e.device_memory->peak_reserved_bytes = 950;
  EXPECT_NE(find(advise(e, env), "memory.near_capacity"), nullptr);
  // Without a known device size there is no share to judge: no finding, no invented number.
  EXPECT_EQ(find(advise(e, Environment{}), "memory.near_capacity"), nullptr);
}

TEST(Advisor, UnaccountedStepTime) {
  EpochSummary e = epoch_with(1000, 0);
  e.phases[static_cast<std::size_t>(Phase::Forward)].wall_ms_total = 500;
  EXPECT_NE(find(advise(e, Environment{}), "scopes.unaccounted"), nullptr);
}

TEST(Advisor, MostSevereFirst) {
  EpochSummary e = epoch_with(500, 500);  // 50 %: critical
  e.phases[static_cast<std::size_t>(Phase::Forward)].wall_ms_total = 100;  // unaccounted: info
  auto fs = advise(e, Environment{});
  ASSERT_GE(fs.size(), 2u);
  EXPECT_EQ(fs.front().severity, Severity::Critical);
  EXPECT_EQ(fs.back().severity, Severity::Info);
}

}  // namespace
}  // namespace fathom
