#include "aggregate/gpu_aggregator.h"

#include <fathom/gpu_summary.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "analyze/summarize_gpu.h"
#include "synthetic_activity.h"

namespace fathom {
namespace {

using test::us;

const KernelStats& kernel_named(const GpuAggregate& a, const std::string& name) {
  auto it = std::find_if(a.kernels.begin(), a.kernels.end(),
                         [&](const KernelStats& k) { return k.name == name; });
  EXPECT_NE(it, a.kernels.end()) << name;
  return *it;
}

TEST(GpuAggregator, PerNameCountTotalMinMax) {
  GpuAggregate a = aggregate(test::one_step());
  EXPECT_EQ(a.kernels.size(), 4u);  // six launches, four names
  const KernelStats& x = kernel_named(a, test::kXmmaBf16);
  EXPECT_EQ(x.count, 2);
  EXPECT_EQ(x.total_ns, us(200));
  EXPECT_EQ(x.min_ns, us(100));
  EXPECT_EQ(x.max_ns, us(100));
  EXPECT_TRUE(x.kind.tensor_core);
  const KernelStats& e = kernel_named(a, test::kElementwise);
  EXPECT_EQ(e.count, 2);
  EXPECT_EQ(e.min_ns, us(5));
  EXPECT_EQ(e.max_ns, us(50));
  EXPECT_EQ(e.tiny_count, 1);
  EXPECT_EQ(e.tiny_ns, us(5));
  EXPECT_TRUE(kernel_named(a, test::kNccl).kind.communication);
}

TEST(GpuAggregator, PhasesFromAnnotationRangesAtLaunchTime) {
  GpuAggregate a = aggregate(test::one_step());
  const PhaseGpuStats& fwd = a.phases[static_cast<std::size_t>(Phase::Forward)];
  EXPECT_EQ(fwd.kernel_count, 2);
  EXPECT_EQ(fwd.kernel_ns, us(200));
  EXPECT_EQ(fwd.tensor_core_ns, us(100));
  EXPECT_EQ(fwd.memcpy_count, 1);  // launched at 210, inside forward [200, 600)
  EXPECT_EQ(fwd.memcpy_bytes, 8000);
  const PhaseGpuStats& bwd = a.phases[static_cast<std::size_t>(Phase::Backward)];
  EXPECT_EQ(bwd.kernel_count, 4);
  EXPECT_EQ(bwd.kernel_ns, us(255));
  EXPECT_EQ(bwd.communication_ns, us(100));
  EXPECT_EQ(bwd.tensor_core_ns, us(100));
  EXPECT_EQ(a.phases[kUnattributed].kernel_count, 0);
}

// The role travels on the record: the aggregator never reads it from the name, so a session's
// "forward" range and a trace's "## forward ##" mean the same, and a name alone means nothing.
TEST(GpuAggregator, PhaseRangesComeFromTheRecordsRoleNotItsName) {
  GpuActivity act = test::one_step();
  for (AnnotationRecord& r : act.annotations) {
    if (r.role != AnnotationRole::Phase || r.phase != Phase::Forward) continue;
    r.name = "a name no parser knows";  // the role alone makes it the forward phase
  }
  act.annotations.push_back(AnnotationRecord{"backward", 1, us(210), us(220)});  // role None
  GpuAggregate a = aggregate(act);
  EXPECT_EQ(a.phases[static_cast<std::size_t>(Phase::Forward)].kernel_count, 2);
  EXPECT_EQ(a.phases[static_cast<std::size_t>(Phase::Forward)].memcpy_count, 1);
  EXPECT_EQ(a.phases[static_cast<std::size_t>(Phase::Backward)].kernel_count, 4);
}

TEST(GpuAggregator, PhaseFromTheSourceWinsOverTimeRanges) {
  GpuActivity act = test::one_step();
  act.kernels[0].phase = Phase::Optimizer;  // the collector's external correlation said so
  GpuAggregate a = aggregate(act);
  EXPECT_EQ(a.phases[static_cast<std::size_t>(Phase::Optimizer)].tensor_core_ns, us(100));
  EXPECT_EQ(a.phases[static_cast<std::size_t>(Phase::Forward)].kernel_count, 1);
}

TEST(GpuAggregator, WithoutAnyHostRecordsWorkIsUnattributed) {
  GpuActivity act = test::one_step();
  act.annotations.clear();
  act.runtime_calls.clear();
  GpuAggregate a = aggregate(act);
  EXPECT_EQ(a.phases[kUnattributed].kernel_count, 6);
  EXPECT_FALSE(a.window_from_steps);
  EXPECT_EQ(a.window_begin_ns, us(220));  // the first record: the copy (the ops start at 248)
  EXPECT_EQ(a.window_end_ns, us(900));
}

TEST(GpuAggregator, EligibleOpsByExternalIdAndByTime) {
  GpuAggregate a = aggregate(test::one_step());
  ASSERT_EQ(a.eligible_ops.size(), 3u);  // aten::add is not eligible
  auto find = [&](const std::string& name, const std::string& shapes) {
    return *std::find_if(
        a.eligible_ops.begin(), a.eligible_ops.end(),
        [&](const EligibleOpStats& s) { return s.name == name && s.shapes == shapes; });
  };
  const EligibleOpStats mm_fp32 = find("aten::mm", "[30,64] [64,128]");
  EXPECT_EQ(mm_fp32.instances, 1);
  EXPECT_EQ(mm_fp32.with_kernels, 1);
  EXPECT_EQ(mm_fp32.only_cuda_cores, 1);
  EXPECT_EQ(mm_fp32.cuda_core_ns, us(100));
  EXPECT_EQ(mm_fp32.misaligned, "M=30");
  EXPECT_EQ(mm_fp32.dtypes, "float float");
  const EligibleOpStats addmm = find("aten::addmm", "[128] [64,64] [64,128]");
  EXPECT_EQ(addmm.only_cuda_cores, 0);
  EXPECT_EQ(addmm.tensor_core_ns, us(100));
  EXPECT_EQ(addmm.misaligned, "");
  // No external id: found as the op running on the launching thread at launch time.
  const EligibleOpStats mm_bf16 = find("aten::mm", "[64,64] [64,64]");
  EXPECT_EQ(mm_bf16.with_kernels, 1);
  EXPECT_EQ(mm_bf16.tensor_core_ns, us(100));
}

TEST(GpuAggregator, TimelineUnionsAndIdleSplit) {
  GpuAggregate a = aggregate(test::one_step());
  EXPECT_TRUE(a.window_from_steps);
  EXPECT_EQ(a.steps, 1);
  EXPECT_EQ(a.window_ns(), us(1000));
  ASSERT_EQ(a.timelines.size(), 1u);
  const DeviceTimelineStats& t = a.timelines[0];
  EXPECT_EQ(t.busy_ns, us(480));
  EXPECT_EQ(t.kernel_ns, us(400));
  EXPECT_EQ(t.compute_ns, us(355));
  EXPECT_EQ(t.communication_ns, us(100));
  EXPECT_EQ(t.memcpy_ns, us(80));
  EXPECT_EQ(t.kernel_or_memcpy_ns, us(480));
  EXPECT_EQ(t.idle_ns, us(520));
  EXPECT_EQ(t.idle.data_wait_ns, us(200));
  EXPECT_EQ(t.idle.host_launch_ns, us(170));
  EXPECT_EQ(t.idle.sync_ns, us(50));
  EXPECT_EQ(t.idle.other_ns, us(100));
  EXPECT_EQ(t.idle.gaps, 4);
}

TEST(GpuAggregator, BatchAndOneByOneAgree) {
  const GpuActivity act = test::one_step();
  GpuAggregator one;
  for (const auto& r : act.devices) one.add(r);
  for (const auto& r : act.annotations) one.add(r);
  for (const auto& r : act.ops) one.add(r);
  for (const auto& r : act.runtime_calls) one.add(r);
  for (const auto& r : act.kernels) one.add(r);
  for (const auto& r : act.memcpys) one.add(r);
  const GpuAggregate a = one.snapshot();
  const GpuAggregate b = aggregate(act);
  EXPECT_EQ(a.records, b.records);
  EXPECT_EQ(a.timelines.at(0).busy_ns, b.timelines.at(0).busy_ns);
  EXPECT_EQ(a.timelines.at(0).idle.host_launch_ns, b.timelines.at(0).idle.host_launch_ns);
  EXPECT_EQ(a.phases[2].tensor_core_ns, b.phases[2].tensor_core_ns);
}

TEST(GpuAggregator, DroppedRecordsAreCarriedThrough) {
  GpuActivity act = test::one_step();
  act.dropped_records = 17;
  GpuAggregator agg;
  agg.add(act);
  agg.add_dropped(3);
  agg.add_dropped(-5);  // nonsense from a source is ignored, not subtracted
  EXPECT_EQ(agg.snapshot().dropped_records, 20);
}

TEST(GpuAggregator, KernelLaunchedInOneBatchCompletesInTheNext) {
  GpuActivity act = test::one_step();
  GpuActivity first = act, second;
  first.kernels.erase(first.kernels.begin() + 2, first.kernels.end());  // k3.. arrive a step later
  second.kernels.assign(act.kernels.begin() + 2, act.kernels.end());
  GpuAggregator agg;
  agg.add(first);
  agg.flush();  // step end
  agg.add(second);
  agg.flush();
  const GpuAggregate a = agg.snapshot();
  EXPECT_EQ(a.phases[static_cast<std::size_t>(Phase::Backward)].kernel_count, 4);
  EXPECT_EQ(a.timelines.at(0).busy_ns, us(480));
  EXPECT_EQ(a.timelines.at(0).idle.host_launch_ns, us(170));
  EXPECT_EQ(a.late_records, 0);
}

// Issue 23: a loop without a sync per step gets a stream's kernels back only when CUPTI's buffer
// is full, many step ends (flushes) after their launches. The launches, ops and phase ranges
// are kept until their kernels arrive, not for two flushes.
TEST(GpuAggregator, KernelsDeliveredManyStepEndsAfterTheirLaunchKeepTheirOpAndPhase) {
  constexpr int kSteps = 30, kLag = 12;
  auto host_of = [](int s) {
    GpuActivity h;
    const std::int64_t t = 1000 * s;
    h.annotations.push_back(test::annotation("forward", t, t + 400));
    h.ops.push_back(test::op("aten::mm", t + 10, t + 300, static_cast<std::uint64_t>(s + 1),
                             {{64, 64}, {64, 64}}, {"c10::BFloat16", "c10::BFloat16"}));
    // A launch (owed a kernel) and a call that is owed nothing.
    RuntimeCallRecord launch = test::call("cudaLaunchKernel", t + 20, t + 25, 100 + s);
    launch.external_id = static_cast<std::uint64_t>(s + 1);
    h.runtime_calls.push_back(launch);
    h.runtime_calls.push_back(test::call("cudaEventQuery", t + 30, t + 31, 5000 + s));
    return h;
  };
  auto kernel_of = [](int s) {
    const std::int64_t t = 1000 * s;
    // Ran long after the step: its kernels come back with a later step's buffer.
    return test::kernel(test::kSgemm, t + 600, t + 700, 100 + s);
  };
  GpuAggregator agg;
  for (int s = 0; s < kSteps + kLag; ++s) {
    GpuActivity batch = s < kSteps ? host_of(s) : GpuActivity{};
    if (s >= kLag) batch.kernels.push_back(kernel_of(s - kLag));
    agg.add(batch);
    agg.flush();  // the step end
  }
  const GpuAggregate a = agg.snapshot();
  const auto& forward = a.phases[static_cast<std::size_t>(Phase::Forward)];
  EXPECT_EQ(forward.kernel_count, kSteps);
  EXPECT_EQ(a.phases[kUnattributed].kernel_count, 0);
  ASSERT_EQ(a.eligible_ops.size(), 1u);
  EXPECT_EQ(a.eligible_ops[0].instances, kSteps);
  EXPECT_EQ(a.eligible_ops[0].with_kernels, kSteps) << "each op found its kernel";
  EXPECT_EQ(a.forgotten_launches, 0);
  // Once paid, nothing is held: memory follows what is owed, not the run.
  EXPECT_LT(agg.held_records(), 10u);
}

// Bad input: the same records delivered late, split over many flushes and reordered inside each
// batch add up to what one sweep of them all gives: nothing counted twice, nothing invented,
// and what could not be attributed stays counted as unattributed.
TEST(GpuAggregator, LateSplitAndReorderedDeliveryAddsUpToOneSweep) {
  GpuActivity all;
  for (int s = 0; s < 20; ++s) {
    const std::int64_t t = 1000 * s;
    all.annotations.push_back(test::annotation(s % 2 ? "backward" : "forward", t, t + 400));
    all.ops.push_back(test::op("aten::mm", t + 10, t + 300, static_cast<std::uint64_t>(s + 1),
                               {{64, 64}, {64, 64}}, {"float", "float"}));
    RuntimeCallRecord launch = test::call("cudaLaunchKernel", t + 20, t + 25, 100 + s);
    launch.external_id = static_cast<std::uint64_t>(s + 1);
    all.runtime_calls.push_back(launch);
    all.kernels.push_back(test::kernel(test::kSgemm, t + 600, t + 700, 100 + s));
    // A kernel whose launch is in no record: unattributed, and counted so.
    all.kernels.push_back(test::kernel(test::kElementwise, t + 800, t + 810, 9000 + s));
  }
  const GpuAggregate once = aggregate(all);

  GpuAggregator agg;
  for (int s = 0; s < 30; ++s) {
    GpuActivity b;
    if (s < 20) {
      b.annotations.push_back(all.annotations[s]);
      b.ops.push_back(all.ops[s]);
      b.runtime_calls.push_back(all.runtime_calls[s]);
    }
    // Kernels ten flushes late, the later one first.
    if (s >= 10) {
      b.kernels.push_back(all.kernels[2 * (s - 10) + 1]);
      b.kernels.push_back(all.kernels[2 * (s - 10)]);
    }
    agg.add(b);
    agg.flush();
  }
  const GpuAggregate split = agg.snapshot();
  ASSERT_EQ(split.kernels.size(), once.kernels.size());
  for (const KernelStats& k : once.kernels) {
    EXPECT_EQ(kernel_named(split, k.name).count, k.count) << k.name;
    EXPECT_EQ(kernel_named(split, k.name).total_ns, k.total_ns) << k.name;
  }
  for (std::size_t p = 0; p < kPhaseBuckets; ++p) {
    EXPECT_EQ(split.phases[p].kernel_count, once.phases[p].kernel_count) << "bucket " << p;
    EXPECT_EQ(split.phases[p].kernel_ns, once.phases[p].kernel_ns) << "bucket " << p;
  }
  EXPECT_EQ(once.phases[kUnattributed].kernel_count, 20) << "the kernels without a launch";
  ASSERT_EQ(split.eligible_ops.size(), 1u);
  EXPECT_EQ(split.eligible_ops[0].instances, once.eligible_ops[0].instances);
  EXPECT_EQ(split.eligible_ops[0].with_kernels, once.eligible_ops[0].with_kernels);
  EXPECT_EQ(split.eligible_ops[0].cuda_core_ns, once.eligible_ops[0].cuda_core_ns);
  EXPECT_EQ(split.records, once.records);
  EXPECT_EQ(split.late_records, 0);
}

// The bound: launches whose kernels never come are forgotten past it, and counted.
TEST(GpuAggregator, OwedLaunchesAreBoundedAndTheCutIsCounted) {
  AggregatorLimits limits;
  limits.host_records = 1000;
  GpuAggregator agg(limits);
  for (int i = 0; i < 10'000; ++i) {
    agg.add(test::call("cudaLaunchKernel", i, i + 1, static_cast<std::uint64_t>(i + 1)));
    if (i % 100 == 99) agg.flush();
  }
  agg.add(test::kernel(test::kSgemm, 20'000, 20'001, 1));  // the first launch's, too late
  EXPECT_LE(agg.held_records(), 1000u);
  const GpuAggregate a = agg.snapshot();
  EXPECT_GT(a.forgotten_launches, 0);
  EXPECT_LE(a.forgotten_launches, 10'000);
  const GpuSummary s = summarize_gpu(a);
  EXPECT_TRUE(std::any_of(s.not_measured.begin(), s.not_measured.end(), [](const auto& u) {
    return u.what == "op and phase of some late GPU work";
  }));
}

TEST(GpuAggregator, RecordsOlderThanTheSweptTimelineAreCountedLate) {
  GpuActivity act = test::one_step();
  KernelRecord old = act.kernels[0];
  GpuAggregator agg;
  agg.add(act);
  agg.flush();
  agg.add(old);  // starts at 300 us, the timeline has been swept to 850 us
  const GpuAggregate a = agg.snapshot();
  EXPECT_EQ(a.late_records, 1);
  EXPECT_EQ(kernel_named(a, test::kXmmaBf16).count, 3);  // still in the totals
  EXPECT_EQ(a.timelines.at(0).busy_ns, us(480));
}

// Memory grows with distinct names, not with launches: a million launches of ten kernels hold
// ten rows and at most one window of records.
TEST(GpuAggregator, MemoryIsBoundedByDistinctNamesNotLaunches) {
  AggregatorLimits limits;
  limits.window_records = 4096;
  GpuAggregator agg(limits);
  const std::string names[] = {
      "volta_sgemm_64x64_nt", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"};
  std::size_t max_held = 0;
  for (std::int64_t i = 0; i < 1'000'000; ++i) {
    KernelRecord k;
    k.name = names[i % 10];
    k.start_ns = i * 100;
    k.end_ns = i * 100 + 50;
    k.correlation_id = static_cast<std::uint64_t>(i + 1);
    agg.add(k);
    max_held = std::max(max_held, agg.held_records());
  }
  const GpuAggregate a = agg.snapshot();
  EXPECT_EQ(a.kernels.size(), 10u);
  EXPECT_LE(max_held, 4096u);
  EXPECT_EQ(a.records, 1'000'000);
  EXPECT_EQ(a.timelines.at(0).busy_ns, 1'000'000LL * 50);
  EXPECT_EQ(a.late_records, 0);
}

TEST(GpuAggregator, HostRecordsAreBoundedWithoutFlushes) {
  AggregatorLimits limits;
  limits.host_records = 1000;
  GpuAggregator agg(limits);
  for (int i = 0; i < 100'000; ++i)
    agg.add(test::call("cudaLaunchKernel", i, i + 1, static_cast<std::uint64_t>(i + 1)));
  EXPECT_LE(agg.held_records(), 1000u);
  EXPECT_EQ(agg.snapshot().runtime_calls.at(0).count, 100'000);
}

TEST(GpuAggregator, KernelNamesPastTheLimitFoldIntoOneRowPerKind) {
  AggregatorLimits limits;
  limits.kernel_names = 2;
  GpuAggregator agg(limits);
  for (const char* n : {"a", "b", "c", test::kXmmaBf16, "d", test::kSgemm})
    agg.add(test::kernel(n, 0, 20, 0));
  const GpuAggregate a = agg.snapshot();
  EXPECT_EQ(a.folded_kernel_names, 4);
  ASSERT_EQ(a.kernels.size(), 5u);  // a, b, then folded unknown, Tensor Core and CUDA-core rows
  EXPECT_EQ(kernel_named(a, "(more kernel names: unknown)").count, 2);
  EXPECT_EQ(kernel_named(a, "(more kernel names: unknown)").kind.decision, Decision::Unknown);
  EXPECT_EQ(kernel_named(a, "(more kernel names)").count, 1);
  EXPECT_TRUE(kernel_named(a, "(more kernel names: tensor core)").kind.tensor_core);
}

TEST(GpuAggregator, NoGpuActivityIsSaid) {
  GpuActivity act;
  act.annotations = {test::annotation("ProfilerStep#1", 0, 100)};
  const GpuAggregate a = aggregate(act);
  EXPECT_FALSE(a.has_gpu_activity());
  EXPECT_TRUE(a.timelines.empty());
}

// Issue 25: a hostile trace names tens of thousands of devices, and each record looked its device
// up by a scan of them all (its properties per kernel, its lane and timeline per sweep, a step's
// busy time per interval): quadratic, minutes for 50,000 devices. The lookups' work is counted,
// not timed: a few entries per record, whatever the number of devices.
TEST(GpuAggregator, FiftyThousandDevicesAggregateInWorkLinearInTheRecords) {
  constexpr int kDevices = 50'000;
  GpuActivity a;
  AnnotationRecord& step = a.annotations.emplace_back();
  step.name = "ProfilerStep#1";
  step.role = AnnotationRole::Step;
  step.start_ns = 0;
  step.end_ns = 100 * kDevices;
  // Falling device ids: a table kept sorted by device moved every entry for each new one.
  for (int d = kDevices - 1; d >= 0; --d) {
    DeviceProperties& p = a.devices.emplace_back();
    p.id = d;
    p.compute_major = 9;
    for (int k = 0; k < 2; ++k) {
      KernelRecord& r = a.kernels.emplace_back();
      r.name = test::kXmmaBf16;
      r.device = d;
      r.start_ns = 10 * d + 5 * k;
      r.end_ns = r.start_ns + 4;
    }
  }
  AggregatorLimits limits;
  limits.step_rows = 1;
  limits.window_records = kDevices / 2;  // several sweeps, each meeting every device again
  GpuAggregator agg(limits);
  agg.add(a);
  const GpuAggregate g = agg.snapshot();
  ASSERT_EQ(g.timelines.size(), std::size_t{kDevices});
  EXPECT_EQ(g.timelines.front().device, 0);
  EXPECT_EQ(g.timelines.back().kernel_ns, 8);
  ASSERT_EQ(g.step_rows.size(), 1u);
  EXPECT_EQ(g.step_rows[0].busy_ns, std::int64_t{8} * kDevices);
  EXPECT_EQ(g.kernels.size(), 1u);
  EXPECT_TRUE(g.kernels[0].kind.tensor_core);
  const std::int64_t records = 3 * kDevices;  // properties and two kernels a device
  EXPECT_LT(agg.device_lookup_steps(), 8 * records) << "device lookups scan the devices";
}

}  // namespace
}  // namespace fathom

namespace fathom {
namespace {

// Graph launches count as launches however they are made: the runtime's, its per-thread
// stream variant, and the driver's (what CUPTI records when a library launches graphs itself).
TEST(LaunchCalls, GraphLaunchesThroughTheRuntimeAndTheDriverAreLaunches) {
  EXPECT_TRUE(is_launch_call("cudaGraphLaunch"));
  EXPECT_TRUE(is_launch_call("cudaGraphLaunch_ptsz"));
  EXPECT_TRUE(is_launch_call("cuGraphLaunch"));
  EXPECT_TRUE(is_launch_call("cuLaunchKernelEx"));
  EXPECT_FALSE(is_launch_call("cudaGraphInstantiate"));
  EXPECT_FALSE(is_launch_call("cudaMemcpyAsync"));
}

}  // namespace
}  // namespace fathom
