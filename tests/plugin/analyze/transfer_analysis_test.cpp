#include "analyze/transfer_analysis.h"

#include <gtest/gtest.h>

#include "aggregate/gpu_aggregator.h"
#include "synthetic_activity.h"

namespace fathom {
namespace {

using test::us;

MemcpyRecord copy(MemcpyKind kind, MemoryKind src, MemoryKind dst, std::int64_t bytes,
                  std::int64_t b, std::int64_t e, bool async) {
  MemcpyRecord m;
  m.kind = kind;
  m.src = src;
  m.dst = dst;
  m.bytes = bytes;
  m.start_ns = us(b);
  m.end_ns = us(e);
  m.async = async;
  return m;
}

GpuActivity copies() {
  GpuActivity a;
  a.annotations = {test::annotation("ProfilerStep#1", 0, 1000)};
  // 1 MB pinned async HtoD in 100 us (10 GB/s) while a kernel runs [50, 150): 50 us overlap.
  a.memcpys.push_back(copy(MemcpyKind::HostToDevice, MemoryKind::Pinned, MemoryKind::Device,
                           1'000'000, 0, 100, true));
  // 2 MB pageable sync HtoD in 400 us (5 GB/s), twice; one is large and synchronous.
  a.memcpys.push_back(copy(MemcpyKind::HostToDevice, MemoryKind::Pageable, MemoryKind::Device,
                           2'000'000, 200, 400, false));
  a.memcpys.push_back(copy(MemcpyKind::HostToDevice, MemoryKind::Pageable, MemoryKind::Device,
                           1'000, 400, 600, false));
  // An async DtoH into pageable memory: asynchronous in name only.
  a.memcpys.push_back(copy(MemcpyKind::DeviceToHost, MemoryKind::Device, MemoryKind::Pageable,
                           4'000, 700, 701, true));
  a.memcpys.push_back(copy(MemcpyKind::DeviceToDevice, MemoryKind::Device, MemoryKind::Device,
                           8'000'000, 800, 801, true));
  a.kernels = {test::kernel(test::kSgemm, 50, 150, 0)};
  return a;
}

TEST(TransferAnalysis, PcieTable) {
  EXPECT_NEAR(*pcie_peak_gb_per_s(3, 16), 15.754, 0.001);
  EXPECT_NEAR(*pcie_peak_gb_per_s(4, 16), 31.508, 0.001);
  EXPECT_NEAR(*pcie_peak_gb_per_s(5, 16), 63.015, 0.001);
  EXPECT_NEAR(*pcie_peak_gb_per_s(1, 1), 0.25, 1e-12);
  EXPECT_NEAR(*pcie_peak_gb_per_s(2, 8), 4.0, 1e-12);
  EXPECT_FALSE(pcie_peak_gb_per_s(7, 16).has_value());
  EXPECT_FALSE(pcie_peak_gb_per_s(4, 3).has_value());
  EXPECT_FALSE(pcie_peak_gb_per_s(0, 16).has_value());
}

TEST(TransferAnalysis, PerDirectionWithPageablePinnedAndSyncSplit) {
  const TransferResult r =
      analyze_transfers(aggregate(copies()), LinkPeak{20.0, "PCIe gen4 x16 (test)"});
  ASSERT_EQ(r.directions.size(), 3u);
  const TransferDirection& h2d = r.directions[0];
  EXPECT_EQ(h2d.direction, MemcpyKind::HostToDevice);
  EXPECT_EQ(h2d.count, 3);
  EXPECT_EQ(h2d.bytes, 3'001'000);
  EXPECT_EQ(h2d.total_ns, us(500));
  EXPECT_EQ(h2d.pinned_bytes, 1'000'000);
  EXPECT_EQ(h2d.pageable_bytes, 2'001'000);
  EXPECT_EQ(h2d.pageable_count, 2);
  EXPECT_EQ(h2d.sync_count, 2);
  EXPECT_EQ(h2d.async_count, 1);
  EXPECT_DOUBLE_EQ(*h2d.gb_per_s, 3'001'000.0 / 500'000.0);
  EXPECT_DOUBLE_EQ(*h2d.share_of_peak, 3'001'000.0 / 500'000.0 / 20.0);
  const TransferDirection& dtod = r.directions[2];
  EXPECT_EQ(dtod.direction, MemcpyKind::DeviceToDevice);
  EXPECT_FALSE(dtod.share_of_peak.has_value());  // not over the PCIe link
  EXPECT_EQ(r.pageable_async_count, 1);
  EXPECT_EQ(r.large_sync_h2d_count, 1);
}

TEST(TransferAnalysis, RowsSplitByHostMemoryAndCall) {
  const TransferResult r = analyze_transfers(aggregate(copies()), LinkPeak{20.0, "test"});
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_EQ(r.rows[0].host_memory, MemoryKind::Pageable);
  EXPECT_FALSE(r.rows[0].async);
  EXPECT_EQ(r.rows[0].bytes, 2'001'000);
  EXPECT_EQ(r.rows[1].host_memory, MemoryKind::Pinned);
  EXPECT_DOUBLE_EQ(*r.rows[1].gb_per_s, 10.0);
  EXPECT_DOUBLE_EQ(*r.rows[1].share_of_peak, 0.5);
  EXPECT_EQ(r.rows[2].direction, MemcpyKind::DeviceToHost);
  EXPECT_EQ(r.rows[2].host_memory, MemoryKind::Pageable);
}

TEST(TransferAnalysis, OverlapWithKernelsAndShareOfWindow) {
  const TransferResult r = analyze_transfers(aggregate(copies()));
  EXPECT_EQ(r.busy_ns, us(100 + 400 + 1 + 1));
  EXPECT_EQ(r.overlap_with_kernels_ns, us(50));
  EXPECT_DOUBLE_EQ(*r.overlap_share, 50.0 / 502.0);
  EXPECT_EQ(r.window_ns, us(1000));
  EXPECT_DOUBLE_EQ(*r.share_of_window, 0.502);
}

TEST(TransferAnalysis, UnknownLinkPeakIsNotMeasured) {
  const TransferResult r = analyze_transfers(aggregate(copies()));
  EXPECT_FALSE(r.link.gb_per_s.has_value());
  for (const TransferRow& row : r.rows) EXPECT_FALSE(row.share_of_peak.has_value());
  EXPECT_TRUE(r.rows[0].gb_per_s.has_value());  // the achieved bandwidth is still measured
}

TEST(TransferAnalysis, NoCopies) {
  const TransferResult r = analyze_transfers(
      aggregate(test::one_step()).memcpys.empty() ? GpuAggregate{} : GpuAggregate{});
  EXPECT_EQ(r.count, 0);
  EXPECT_FALSE(r.share_of_window.has_value());
  EXPECT_FALSE(r.overlap_share.has_value());
}

TEST(TransferAnalysis, Names) {
  EXPECT_EQ(memcpy_kind_name(MemcpyKind::HostToDevice), "HtoD");
  EXPECT_EQ(memory_kind_name(MemoryKind::Pageable), "pageable");
}

}  // namespace
}  // namespace fathom
