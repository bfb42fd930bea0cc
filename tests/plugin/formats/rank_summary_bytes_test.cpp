#include "formats/rank_summary_bytes.h"

#include <fathom/error.h>
#include <fathom/rank_summary.h>
#include <gtest/gtest.h>

#include "rank_fixtures.h"

namespace fathom {
namespace {

TEST(RankSummary, RoundTripsEveryField) {
  RankSummary s = testing::rank_summary(3, 4, 12.5, 3.25);
  s.epoch = 7;
  s.failed_steps = 1;
  s.device_peak_allocated_bytes = 123456789;
  s.device_peak_reserved_bytes = 223456789;
  s.ended_by_exception = true;
  s.work_ms_median = 11.75;
  s.top_findings = {{"data.loader_bound", Severity::Critical}, {"memory.pinned", Severity::Info}};
  const auto bytes = serialize_rank_summary(s);
  const RankSummary t = parse_rank_summary(bytes);
  EXPECT_EQ(t.rank, s.rank);
  EXPECT_EQ(t.epoch, 7);
  EXPECT_EQ(t.host, s.host);
  EXPECT_EQ(t.pid, s.pid);
  EXPECT_EQ(t.steps, s.steps);
  EXPECT_EQ(t.failed_steps, 1);
  EXPECT_EQ(t.samples, s.samples);
  EXPECT_DOUBLE_EQ(t.step_ms_total, s.step_ms_total);
  EXPECT_DOUBLE_EQ(t.step_ms_max, s.step_ms_max);
  EXPECT_DOUBLE_EQ(t.wall_ms, s.wall_ms);
  EXPECT_EQ(t.phase_ms, s.phase_ms);
  EXPECT_EQ(t.comm.source, CommSource::Host);
  EXPECT_EQ(t.comm.collectives, 40);
  EXPECT_EQ(t.comm.bytes, 40 << 20);
  EXPECT_DOUBLE_EQ(t.comm.busy_ms, s.comm.busy_ms);
  EXPECT_DOUBLE_EQ(t.comm.exposed_ms, s.comm.exposed_ms);
  EXPECT_EQ(t.device_peak_allocated_bytes, 123456789);
  EXPECT_EQ(t.device_peak_reserved_bytes, 223456789);
  EXPECT_EQ(t.peak_rss_bytes, 512LL << 20);
  EXPECT_TRUE(t.ended_by_exception);
  ASSERT_EQ(t.top_findings.size(), 2u);
  EXPECT_EQ(t.top_findings[0].id, "data.loader_bound");
  EXPECT_EQ(t.top_findings[0].severity, Severity::Critical);
  EXPECT_DOUBLE_EQ(t.work_ms_mean(), 12.5);
  EXPECT_EQ(t.work_ms_median, 11.75);
  EXPECT_DOUBLE_EQ(t.work_ms(), 11.75);
}

TEST(RankSummary, AbsentMemoryStaysAbsent) {
  RankSummary s = testing::rank_summary(0, 2, 1.0);
  s.peak_rss_bytes.reset();
  const RankSummary t = parse_rank_summary(serialize_rank_summary(s));
  EXPECT_FALSE(t.peak_rss_bytes);
  EXPECT_FALSE(t.device_peak_allocated_bytes);
  EXPECT_FALSE(t.work_ms_median);
  EXPECT_DOUBLE_EQ(t.work_ms(), t.work_ms_mean());
}

TEST(RankSummary, StaysWithinItsStatedSize) {
  RankSummary s = testing::rank_summary(999, 1000, 1.0);
  s.host = std::string(200, 'h');  // cut to kRankSummaryHostBytes
  s.device_peak_allocated_bytes = 1;
  s.device_peak_reserved_bytes = 1;
  for (int i = 0; i < 5; ++i) s.top_findings.push_back({std::string(100, 'f'), Severity::Warning});
  const auto bytes = serialize_rank_summary(s);
  EXPECT_EQ(bytes.size(), kMaxRankSummaryBytes);  // the largest a summary can be
  EXPECT_EQ(kMaxRankSummaryBytes, 347u);          // the size docs/distributed.md states
  const RankSummary t = parse_rank_summary(bytes);
  EXPECT_EQ(t.host.size(), kRankSummaryHostBytes);
  EXPECT_EQ(t.top_findings.size(), kRankSummaryTopFindings);
  EXPECT_EQ(t.top_findings[0].id.size(), kRankSummaryFindingIdBytes);
  // A typical rank: a short host name, one finding.
  RankSummary typical = testing::rank_summary(1, 8, 1.0);
  typical.top_findings = {{"data.loader_bound", Severity::Warning}};
  EXPECT_LT(serialize_rank_summary(typical).size(), 220u);
}

TEST(RankSummary, RejectsWhatItDidNotWrite) {
  auto bytes = serialize_rank_summary(testing::rank_summary(1, 2, 1.0));
  for (std::size_t cut : {0ul, 5ul, 100ul, bytes.size() - 1}) {
    std::vector<std::uint8_t> part(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_THROW(parse_rank_summary(part), Error) << "cut at " << cut;
  }
  auto bad = bytes;
  bad[0] = 'X';
  EXPECT_THROW(parse_rank_summary(bad), Error);
  bad = bytes;
  bad[4] = 99;  // version
  try {
    parse_rank_summary(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version 99"), std::string::npos) << e.what();
  }
  bad = bytes;
  bad.push_back(0);
  EXPECT_THROW(parse_rank_summary(bad), Error);
  bad = bytes;
  bad[6] = 5;  // rank 5 of world size 2
  EXPECT_THROW(parse_rank_summary(bad), Error);
}

}  // namespace
}  // namespace fathom
