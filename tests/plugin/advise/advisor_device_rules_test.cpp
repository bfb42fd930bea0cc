// Device telemetry rules: PCIe link, clocks (advisor_device_rules.cpp).
#include <gtest/gtest.h>

#include "advise/advisor.h"
#include "advisor_fixtures.h"

namespace fathom {
namespace {

using test::epoch_with;
using test::evidence;
using test::find;

TEST(AdvisorDevice, LinkBelowItsGenerationUnderLoadFires) {
  EpochSummary e = epoch_with(1000, 0);
  e.telemetry = test::busy_telemetry();
  e.telemetry->pcie.gen = 3;
  const auto f = find(advise(e, Environment{}), finding_id::kLinkDegraded);
  ASSERT_TRUE(f);
  EXPECT_EQ(evidence(*f, "link in use")->value, "gen 3 x16");
  EXPECT_EQ(evidence(*f, "link supported")->value, "gen 5 x16");
  EXPECT_EQ(evidence(*f, "peak bandwidth")->value, "15.75 GB/s of 63.02 GB/s per direction");
  EXPECT_EQ(f->estimated_gain, "host-device copies up to 4.0x faster");
  EXPECT_NE(f->fix.find("nvlink"), std::string::npos);
}

TEST(AdvisorDevice, NarrowLinkFiresEvenWhenIdle) {
  EpochSummary e = epoch_with(1000, 0);
  e.telemetry = test::busy_telemetry();
  e.telemetry->pcie = PcieLinkState{5, 8, 5, 16, false};
  ASSERT_TRUE(find(advise(e, Environment{}), finding_id::kLinkDegraded));
}

TEST(AdvisorDevice, FullLinkOrIdleGenerationDropDoesNotFire) {
  EpochSummary e = epoch_with(1000, 0);
  e.telemetry = test::busy_telemetry();
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kLinkDegraded));
  // An idle GPU lowers its link generation to save power: not a finding.
  e.telemetry->pcie = PcieLinkState{1, 16, 5, 16, false};
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kLinkDegraded));
  e.telemetry->pcie = PcieLinkState{};  // not read
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kLinkDegraded));
}

TEST(AdvisorDevice, PowerCapThrottlingFires) {
  EpochSummary e = epoch_with(1000, 0);
  e.telemetry = test::busy_telemetry();
  e.telemetry->throttle = {{"sw_power_cap", 0.4}, {"gpu_idle", 0.9}};
  e.telemetry->sm_clock_mhz_mean = 1485;
  e.telemetry->power_w_mean = 690;
  e.telemetry->power_limit_w = 700;
  const auto f = find(advise(e, Environment{}), finding_id::kClocksThrottled);
  ASSERT_TRUE(f);
  EXPECT_EQ(evidence(*f, "reasons (share of samples)")->value, "sw_power_cap 40.0 %");
  EXPECT_EQ(evidence(*f, "SM clock")->value, "1485 MHz mean of 1980 MHz max");
  EXPECT_EQ(f->estimated_gain, "up to 25.0 % of compute-bound kernel time");
}

TEST(AdvisorDevice, IdleOrRareThrottlingDoesNotFire) {
  EpochSummary e = epoch_with(1000, 0);
  e.telemetry = test::busy_telemetry();
  e.telemetry->throttle = {{"gpu_idle", 0.9}, {"hw_thermal_slowdown", 0.05}};
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kClocksThrottled));
}

}  // namespace
}  // namespace fathom
