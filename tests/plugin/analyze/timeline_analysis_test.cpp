#include "analyze/timeline_analysis.h"

#include <gtest/gtest.h>

#include "aggregate/gpu_aggregator.h"
#include "synthetic_activity.h"

namespace fathom {
namespace {

using test::us;

TEST(TimelineAnalysis, BusyShareAndIdleBreakdown) {
  const TimelineResult r = analyze_timeline(aggregate(test::one_step()));
  EXPECT_EQ(r.window_ns, us(1000));
  EXPECT_TRUE(r.window_from_steps);
  EXPECT_EQ(r.steps, 1);
  ASSERT_EQ(r.devices.size(), 1u);
  const DeviceTimeline& d = r.devices[0];
  EXPECT_DOUBLE_EQ(*d.busy_share, 0.48);
  EXPECT_EQ(d.idle_ns, us(520));
  EXPECT_EQ(d.idle.data_wait_ns, us(200));
  EXPECT_EQ(d.idle.host_launch_ns, us(170));
  EXPECT_EQ(d.idle.sync_ns, us(50));
  EXPECT_EQ(d.idle.other_ns, us(100));
  EXPECT_EQ(d.idle.data_wait_ns + d.idle.host_launch_ns + d.idle.sync_ns + d.idle.other_ns,
            d.idle_ns);
}

TEST(TimelineAnalysis, TinyKernels) {
  const TimelineResult r = analyze_timeline(aggregate(test::one_step()));
  EXPECT_EQ(r.kernel_count, 6);
  EXPECT_EQ(r.tiny_kernel_count, 1);
  EXPECT_EQ(r.tiny_kernel_ns, us(5));
  EXPECT_DOUBLE_EQ(*r.tiny_count_share, 1.0 / 6.0);
  EXPECT_DOUBLE_EQ(*r.tiny_time_share, 5.0 / 455.0);
}

TEST(TimelineAnalysis, CommunicationAndItsOverlapWithCompute) {
  const TimelineResult r = analyze_timeline(aggregate(test::one_step()));
  EXPECT_EQ(r.communication_kernels, 1);
  EXPECT_EQ(r.communication_ns, us(100));
  EXPECT_DOUBLE_EQ(*r.communication_share, 0.1);
  EXPECT_EQ(r.devices[0].communication_overlap_ns, us(55));
  EXPECT_DOUBLE_EQ(*r.devices[0].communication_overlap_share, 0.55);
}

TEST(TimelineAnalysis, LaunchesAndHostSyncs) {
  const TimelineResult r = analyze_timeline(aggregate(test::one_step()));
  EXPECT_EQ(r.launch_calls, 6);
  EXPECT_TRUE(r.launches_recorded);
  EXPECT_EQ(r.sync_calls, 1);
  EXPECT_EQ(r.sync_call_ns, us(30));
}

TEST(TimelineAnalysis, SyncRecordsCountHostBlockingKindsOnly) {
  GpuActivity a = test::one_step();
  a.syncs.push_back(SyncRecord{SyncKind::Stream, 7, us(780), us(810), 0});
  a.syncs.push_back(SyncRecord{SyncKind::StreamWaitEvent, 7, us(100), us(900), 0});
  const TimelineResult r = analyze_timeline(aggregate(a));
  EXPECT_EQ(r.sync_records, 1);
  EXPECT_EQ(r.sync_record_ns, us(30));
  // The stream wait spans the whole step but does not block the host: the split is unchanged.
  EXPECT_EQ(r.devices[0].idle.sync_ns, us(50));
  EXPECT_EQ(r.devices[0].idle.host_launch_ns, us(170));
}

TEST(TimelineAnalysis, NoCommunicationIsNoShare) {
  GpuActivity a;
  a.kernels = {test::kernel(test::kSgemm, 0, 100, 0)};
  const TimelineResult r = analyze_timeline(aggregate(a));
  EXPECT_FALSE(r.communication_share.has_value());
  EXPECT_FALSE(r.devices[0].communication_overlap_share.has_value());
  EXPECT_FALSE(r.launches_recorded);
  EXPECT_DOUBLE_EQ(*r.devices[0].busy_share, 1.0);
}

}  // namespace
}  // namespace fathom
