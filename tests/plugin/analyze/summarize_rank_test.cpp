#include "analyze/summarize_rank.h"

#include <fathom/error.h>
#include <fathom/rank_summary.h>
#include <gtest/gtest.h>

#include "rank_fixtures.h"

namespace fathom {
namespace {

TEST(RankSummary, SummarizesAnEpoch) {
  EpochSummary e;
  e.index = 2;
  e.steps = 4;
  e.samples = 128;
  e.wall_ms = 100;
  e.step_ms_total = 80;
  e.step_ms_max = 25;
  e.phases[static_cast<std::size_t>(Phase::Data)].wall_ms_total = 12;
  e.phases[static_cast<std::size_t>(Phase::Backward)].wall_ms_total = 30;
  e.peak_rss_bytes = 1 << 30;
  e.findings.push_back({.id = "a.info", .severity = Severity::Info});
  e.findings.push_back({.id = "b.critical", .severity = Severity::Critical});
  e.findings.push_back({.id = "c.warning", .severity = Severity::Warning});
  e.findings.push_back({.id = "d.critical", .severity = Severity::Critical});
  CommStats comm{CommSource::Host, 8, 1 << 20, 20.0, 8.0};
  const RankSummary s = summarize_rank(e, {1, 1, 2}, comm, "host-a", 42);
  EXPECT_EQ(s.epoch, 2);
  EXPECT_EQ(s.rank, (RankInfo{1, 1, 2}));
  EXPECT_DOUBLE_EQ(s.data_ms_mean(), 3.0);
  EXPECT_DOUBLE_EQ(s.work_ms_mean(), (80.0 - 8.0) / 4);
  EXPECT_EQ(s.comm.source, CommSource::Host);
  EXPECT_EQ(s.peak_rss_bytes, 1 << 30);
  ASSERT_EQ(s.top_findings.size(), 3u);  // the most severe first, in report order
  EXPECT_EQ(s.top_findings[0].id, "b.critical");
  EXPECT_EQ(s.top_findings[1].id, "d.critical");
  EXPECT_EQ(s.top_findings[2].id, "c.warning");
}

TEST(RankSummary, GpuCommunicationWinsOverTheHostClock) {
  EpochSummary e;
  e.steps = 2;
  e.step_ms_total = 20;
  GpuSummary g;
  g.timeline.communication_kernels = 6;
  DeviceTimeline d;
  d.communication_ns = 4'000'000;
  d.communication_overlap_ns = 3'000'000;
  g.timeline.devices.push_back(d);
  e.gpu = g;
  const RankSummary s = summarize_rank(e, {0, 0, 2}, {CommSource::Host, 1, 1, 9.0, 9.0}, "h", 1);
  EXPECT_EQ(s.comm.source, CommSource::Gpu);
  EXPECT_EQ(s.comm.collectives, 6);
  EXPECT_DOUBLE_EQ(s.comm.busy_ms, 4.0);
  EXPECT_DOUBLE_EQ(s.comm.exposed_ms, 1.0);
}

}  // namespace
}  // namespace fathom
