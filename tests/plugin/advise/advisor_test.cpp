// The host-side rules (advisor_host_rules.cpp) and the ordering of findings (advisor.cpp).
#include "advise/advisor.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "advisor_fixtures.h"

namespace fathom {
namespace {

using test::epoch_with;
using test::find;

TEST(Advisor, DataWaitAboveFivePercentFires) {
  auto fs = advise(epoch_with(900, 100), Environment{});  // 10 % of step + data
  const auto f = find(fs, finding_id::kDataLoaderBound);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::Warning);
  EXPECT_NEAR(*f->gain_fraction, 0.10, 1e-9);
  EXPECT_EQ(f->evidence.at(0).value, "10.0 %");
  EXPECT_NE(f->fix.find("workers("), std::string::npos);
  EXPECT_NE(f->fix.find("max_jobs("), std::string::npos);  // prefetch
  EXPECT_FALSE(f->applied);
}

TEST(Advisor, DataWaitBelowFivePercentDoesNot) {
  auto fs = advise(epoch_with(1000, 40), Environment{});  // 3.8 %
  EXPECT_FALSE(find(fs, finding_id::kDataLoaderBound));
}

TEST(Advisor, DataWaitAboveQuarterIsCritical) {
  auto fs = advise(epoch_with(600, 400), Environment{});
  EXPECT_EQ(find(fs, finding_id::kDataLoaderBound)->severity, Severity::Critical);
}

TEST(Advisor, PageableCopyFiresPinnedDoesNot) {
  EpochSummary e = epoch_with(1000, 0);
  e.copies.push_back(CopySummary{CopyDirection::HostToDevice, true, true, 5, 5 << 20, 1.0});
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kCopyPageable));
  e.copies.push_back(CopySummary{CopyDirection::HostToDevice, false, true, 5, 5 << 20, 1.0});
  const auto f = find(advise(e, Environment{}), finding_id::kCopyPageable);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->evidence.at(0).value, "5");
  EXPECT_EQ(f->evidence.at(1).value, "5.0 MiB");
  EXPECT_NE(f->fix.find("pin_memory()"), std::string::npos);
  EXPECT_NE(f->fix.find("non_blocking=*/true"), std::string::npos);
}

TEST(Advisor, DeviceToHostPageableCopiesDoNotFire) {
  EpochSummary e = epoch_with(1000, 0);
  e.copies.push_back(CopySummary{CopyDirection::DeviceToHost, false, false, 5, 5 << 20, 1.0});
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kCopyPageable));
}

TEST(Advisor, LargeSynchronousCopiesFireSmallOnesDoNot) {
  EpochSummary e = epoch_with(1000, 0);
  e.copies.push_back(CopySummary{CopyDirection::HostToDevice, true, false, 10, 10 * 1024, 1.0});
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kCopySynchronous));  // 1 KiB each
  e.copies[0].bytes = 10 * (1 << 20);
  const auto f = find(advise(e, Environment{}), finding_id::kCopySynchronous);
  ASSERT_TRUE(f);
  EXPECT_NEAR(*f->gain_fraction, 0.001, 1e-9);
}

TEST(Advisor, UnaccountedStepTimeFires) {
  EpochSummary e = epoch_with(1000, 0);
  e.phases[static_cast<std::size_t>(Phase::Forward)].wall_ms_total = 500;
  const auto f = find(advise(e, Environment{}), finding_id::kScopesUnaccounted);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->evidence.at(0).value, "50.0 %");
}

TEST(Advisor, FullyScopedStepTimeDoesNot) {
  EXPECT_FALSE(find(advise(epoch_with(1000, 0), Environment{}), finding_id::kScopesUnaccounted));
}

TEST(Advisor, QuietEpochHasNoFindings) {
  EXPECT_TRUE(advise(epoch_with(1000, 10), Environment{}).empty());
}

TEST(Advisor, MostSevereFirstThenLargestGain) {
  EpochSummary e = epoch_with(500, 500);                                   // 50 %: critical
  e.phases[static_cast<std::size_t>(Phase::Forward)].wall_ms_total = 100;  // unaccounted: info
  e.copies.push_back(CopySummary{CopyDirection::HostToDevice, true, false, 10, 100 << 20, 50.0});
  auto fs = advise(e, Environment{});
  ASSERT_EQ(fs.size(), 3u);
  EXPECT_EQ(fs.front().severity, Severity::Critical);
  // Two infos: the synchronous copies (10 % of step time) before the unaccounted time (no gain).
  EXPECT_EQ(fs[1].id, finding_id::kCopySynchronous);
  EXPECT_EQ(fs[2].id, finding_id::kScopesUnaccounted);
}

TEST(Advisor, EveryFindingCarriesEvidenceGainAndFix) {
  EpochSummary e = epoch_with(500, 500);
  e.phases[static_cast<std::size_t>(Phase::Forward)].wall_ms_total = 100;
  e.copies.push_back(CopySummary{CopyDirection::HostToDevice, false, false, 10, 100 << 20, 50.0});
  for (const Finding& f : advise(e, Environment{})) {
    EXPECT_FALSE(f.evidence.empty()) << f.id;
    EXPECT_FALSE(f.why.empty()) << f.id;
    EXPECT_FALSE(f.estimated_gain.empty()) << f.id;
    EXPECT_FALSE(f.fix.empty()) << f.id;
  }
}

// Every id a report can hold is declared in finding_id and has its rule in docs/thresholds.md.
TEST(Advisor, EveryFindingIdIsDocumented) {
  namespace id = finding_id;
  std::ifstream in(std::string(FATHOM_GOLDEN_DIR) + "/../../../../docs/thresholds.md");
  ASSERT_TRUE(in) << "docs/thresholds.md not found";
  std::stringstream doc;
  doc << in.rdbuf();
  for (std::string_view v : {id::kDataLoaderBound,
                             id::kCopyPageable,
                             id::kCopySynchronous,
                             id::kTransferBelowLinkPeak,
                             id::kTransferExposed,
                             id::kLinkDegraded,
                             id::kMemoryNearCapacity,
                             id::kHardwareFit,
                             id::kBatchHeadroom,
                             id::kMixedPrecision,
                             id::kHostSync,
                             id::kLaunchBound,
                             id::kCommunication,
                             id::kClocksThrottled,
                             id::kScopesUnaccounted,
                             id::kStepSlowdown,
                             id::kMemoryCreep,
                             id::kLowUtilization,
                             id::kMixedPrecisionRolledBack,
                             id::kActivationCheckpointing,
                             id::kActivationPlan,
                             id::kRankStraggler,
                             id::kRankDataWait,
                             id::kRankLoadImbalance,
                             id::kRankCommunicationExposed,
                             id::kRanksMissing})
    EXPECT_NE(doc.str().find("`" + std::string(v) + "`"), std::string::npos) << v;
}

}  // namespace
}  // namespace fathom
