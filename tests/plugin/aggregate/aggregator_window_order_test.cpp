// GPU records delivered out of order (copies after the kernels that ran after them, devices
// interleaved, starts that tie) aggregate exactly as the same records delivered in order: the
// held window reads them by device, then start, ties in arrival order, without sorting it.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <variant>
#include <vector>

#include "aggregate/gpu_aggregator.h"
#include "synthetic_activity.h"

namespace fathom {
namespace {

using test::us;

using GpuRecord = std::variant<KernelRecord, MemcpyRecord>;

std::int32_t device_of(const GpuRecord& r) {
  return std::visit([](const auto& x) { return x.device; }, r);
}
std::int64_t start_of(const GpuRecord& r) {
  return std::visit([](const auto& x) { return x.start_ns; }, r);
}

struct Window {
  std::vector<AnnotationRecord> annotations;
  std::vector<RuntimeCallRecord> calls;
  std::vector<GpuRecord> gpu;  // in delivery order
};

// Host records first, then the GPU records; a flush ends each window, as the session's step ends.
GpuAggregate feed(const std::vector<Window>& windows, bool sort_each_window) {
  AggregatorLimits limits;
  limits.step_rows = 1000;
  GpuAggregator agg(limits);
  for (const Window& w : windows) {
    for (const auto& a : w.annotations) agg.add(a);
    for (const auto& c : w.calls) agg.add(c);
    std::vector<GpuRecord> gpu = w.gpu;
    if (sort_each_window)
      std::stable_sort(gpu.begin(), gpu.end(), [](const GpuRecord& a, const GpuRecord& b) {
        return device_of(a) != device_of(b) ? device_of(a) < device_of(b)
                                            : start_of(a) < start_of(b);
      });
    for (const GpuRecord& r : gpu) std::visit([&](const auto& x) { agg.add(x); }, r);
    agg.flush();
  }
  return agg.snapshot();
}

MemcpyRecord copy(std::int64_t b, std::int64_t e, std::uint64_t corr, std::int32_t device = 0) {
  MemcpyRecord m;
  m.kind = MemcpyKind::HostToDevice;
  m.src = MemoryKind::Pinned;
  m.dst = MemoryKind::Device;
  m.bytes = 1 << 20;
  m.async = true;
  m.device = device;
  m.start_ns = us(b);
  m.end_ns = us(e);
  m.correlation_id = corr;
  return m;
}

void expect_same(const GpuAggregate& got, const GpuAggregate& want) {
  EXPECT_EQ(got.records, want.records);
  EXPECT_EQ(got.late_records, want.late_records);
  ASSERT_EQ(got.timelines.size(), want.timelines.size());
  for (std::size_t i = 0; i < got.timelines.size(); ++i) {
    const DeviceTimelineStats &g = got.timelines[i], &w = want.timelines[i];
    SCOPED_TRACE(testing::Message() << "device " << w.device);
    EXPECT_EQ(g.device, w.device);
    EXPECT_EQ(g.busy_ns, w.busy_ns);
    EXPECT_EQ(g.kernel_ns, w.kernel_ns);
    EXPECT_EQ(g.compute_ns, w.compute_ns);
    EXPECT_EQ(g.communication_ns, w.communication_ns);
    EXPECT_EQ(g.memcpy_ns, w.memcpy_ns);
    EXPECT_EQ(g.kernel_or_memcpy_ns, w.kernel_or_memcpy_ns);
    EXPECT_EQ(g.idle_ns, w.idle_ns);
    EXPECT_EQ(g.idle.gaps, w.idle.gaps);
    EXPECT_EQ(g.idle.data_wait_ns, w.idle.data_wait_ns);
    EXPECT_EQ(g.idle.sync_ns, w.idle.sync_ns);
    EXPECT_EQ(g.idle.host_launch_ns, w.idle.host_launch_ns);
    EXPECT_EQ(g.idle.other_ns, w.idle.other_ns);
  }
  ASSERT_EQ(got.step_rows.size(), want.step_rows.size());
  for (std::size_t i = 0; i < got.step_rows.size(); ++i) {
    EXPECT_EQ(got.step_rows[i].busy_ns, want.step_rows[i].busy_ns) << "step " << i;
    EXPECT_EQ(got.step_rows[i].work.kernel_ns, want.step_rows[i].work.kernel_ns) << "step " << i;
    EXPECT_EQ(got.step_rows[i].work.memcpy_ns, want.step_rows[i].work.memcpy_ns) << "step " << i;
  }
  for (std::size_t p = 0; p < kPhaseBuckets; ++p) {
    EXPECT_EQ(got.phases[p].kernel_ns, want.phases[p].kernel_ns) << "phase " << p;
    EXPECT_EQ(got.phases[p].memcpy_ns, want.phases[p].memcpy_ns) << "phase " << p;
  }
}

// The gap before a start that two records share is "launched late" or not by the record read
// first: arrival order decides it, in the run, between the run and the late ones, and among them.
TEST(AggregatorWindowOrder, TiesAreReadInArrivalOrder) {
  Window w;
  w.annotations = {test::annotation("ProfilerStep#1", 0, 2000)};
  struct Gpu {
    std::int64_t b, e, launch;
    bool is_copy;
  };
  const std::vector<Gpu> delivered = {
      {100, 200, 50, false},    // A
      {300, 400, 250, false},   // B: launched after the GPU went idle at 200
      {400, 450, 260, false},   // D
      {300, 350, 150, true},    // C: a copy delivered late, tying B; launched before the gap
      {900, 1000, 880, false},  // H
      {800, 850, 790, false},   // S1: late, launched after the GPU went idle at 450
      {800, 820, 400, false},   // S2: late, tying S1; launched before the gap
  };
  std::uint64_t corr = 0;
  for (const Gpu& g : delivered) {
    w.calls.push_back(test::call(g.is_copy ? "cudaMemcpyAsync" : "cudaLaunchKernel", g.launch,
                                 g.launch + 1, ++corr));
    if (g.is_copy)
      w.gpu.emplace_back(copy(g.b, g.e, corr));
    else
      w.gpu.emplace_back(test::kernel(test::kSgemm, g.b, g.e, corr));
  }
  const GpuAggregate got = feed({w}, false);
  ASSERT_EQ(got.timelines.size(), 1u);
  const DeviceTimelineStats& t = got.timelines[0];
  EXPECT_EQ(t.busy_ns, us(400));
  EXPECT_EQ(t.idle.gaps, 5);
  // [0,100) A, [200,300) B (not C), [450,800) S1 (not S2), [850,900) H; [1000,2000) is other.
  EXPECT_EQ(t.idle.host_launch_ns, us(100 + 100 + 350 + 50));
  EXPECT_EQ(t.idle.other_ns, us(1000));
  EXPECT_EQ(got.late_records, 0);
  expect_same(got, feed({w}, true));
}

// Thirty steps on two devices: each device's kernels in order, the devices interleaved, copies
// delivered after the step's kernels though they ran first, neighbours swapped, starts tied
// across streams; kernels launched before and after the GPU went idle.
TEST(AggregatorWindowOrder, OutOfOrderDeliveryAggregatesAsSortedDelivery) {
  std::mt19937_64 rng(4);
  std::vector<Window> windows;
  std::uint64_t corr = 0;
  const char* names[] = {test::kXmmaBf16, test::kSgemm, test::kElementwise, test::kNccl};
  for (std::int64_t step = 0; step < 30; ++step) {
    Window w;
    const std::int64_t base = step * 10'000;
    w.annotations = {
        test::annotation(("ProfilerStep#" + std::to_string(step)).c_str(), base, base + 10'000),
        test::annotation("forward", base + 1'000, base + 5'000),
        test::annotation("backward", base + 5'000, base + 9'000)};
    std::vector<GpuRecord> kernels[2], copies;
    for (std::int32_t device = 0; device < 2; ++device) {
      std::int64_t t = base + 1'000;
      for (int i = 0; i < 60; ++i) {
        t += static_cast<std::int64_t>(rng() % 3 == 0 ? 0 : rng() % 150);  // 0: a tie
        const std::int64_t len = 5 + static_cast<std::int64_t>(rng() % 100);
        const std::int64_t launch = t - static_cast<std::int64_t>(rng() % 200);
        w.calls.push_back(test::call("cudaLaunchKernel", launch, launch + 1, ++corr));
        KernelRecord k = test::kernel(names[rng() % 4], t, t + len, corr);
        k.device = device;
        kernels[device].emplace_back(k);
      }
      for (int i = 0; i < 3; ++i) {
        const std::int64_t b = base + 100 + i * 300 + static_cast<std::int64_t>(rng() % 50);
        w.calls.push_back(test::call("cudaMemcpyAsync", b - 50, b - 49, ++corr));
        copies.emplace_back(copy(b, b + 200, corr, device));
      }
    }
    // The devices' kernels interleaved at random, each in its own order.
    std::size_t i0 = 0, i1 = 0;
    while (i0 < kernels[0].size() || i1 < kernels[1].size()) {
      const bool first = i1 == kernels[1].size() || (i0 < kernels[0].size() && rng() % 2);
      w.gpu.push_back(first ? kernels[0][i0++] : kernels[1][i1++]);
    }
    // A few neighbours swapped (a later buffer flushed first), then the copies.
    for (int s = 0; s < 6; ++s) {
      const std::size_t at = rng() % (w.gpu.size() - 1);
      std::swap(w.gpu[at], w.gpu[at + 1]);
    }
    w.gpu.insert(w.gpu.end(), copies.begin(), copies.end());
    windows.push_back(std::move(w));
  }
  const GpuAggregate got = feed(windows, false), want = feed(windows, true);
  ASSERT_EQ(want.timelines.size(), 2u);
  EXPECT_GT(want.timelines[0].idle.host_launch_ns, 0);
  EXPECT_GT(want.timelines[0].idle.other_ns, 0);
  expect_same(got, want);
}

}  // namespace
}  // namespace fathom
