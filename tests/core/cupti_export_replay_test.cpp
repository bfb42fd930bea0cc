// Issue 23: the live path on real GPU data. One device's kernels from a real two-GPU H100 Nsight
// export (their mangled names as CUPTI gave them, their streams and durations, in launch order)
// are replayed through the CUPTI stand-in, which delivers them as CUPTI does: one buffer per
// stream, a non-forced flush at each step end that returns only complete buffers (a kernel
// buffer holds all of them: nothing comes back until the epoch's end), kernels finishing after
// their step's end (no sync per step), a forced flush at the epoch's end. The live collector's
// result, aggregated, must equal the aggregation of the export's own records.
#include <fathom/replay.h>

#include <algorithm>
#include <map>

#include "aggregate/gpu_aggregator.h"
#include "records/annotation_roles.h"
#include "standin_fixture.h"

namespace fathom {
namespace {

class ExportReplayTest : public testing::StandinTest {
 protected:
  // The export's device-0 kernels, in launch (start) order.
  static std::vector<KernelRecord> device_kernels(const std::string& path, std::int32_t device) {
    GpuActivity ex = load_nsight_export(path);
    std::vector<KernelRecord> ks;
    for (KernelRecord& k : ex.kernels)
      if (k.device == device) ks.push_back(std::move(k));
    std::sort(ks.begin(), ks.end(),
              [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
    return ks;
  }

  void replay_and_compare(const std::string& path) {
    const std::vector<KernelRecord> ks = device_kernels(path, 0);
    ASSERT_GT(ks.size(), 1000u);
    GpuActivity reference;
    reference.kernels = ks;
    const GpuAggregate want = aggregate(reference);

    auto c = start();
    ASSERT_TRUE(c->collecting()) << testing::all_notes(c->not_measured());
    std::vector<AnnotationRecord> phases;
    constexpr std::size_t kPerStep = 100;
    for (std::size_t i = 0; i < ks.size(); i += kPerStep) {
      ++step_no;
      c->check_clients();
      const std::int64_t begin = now_ns();
      push_external_id(ExternalIdKind::Phase, phase_external_id(Phase::Forward));
      for (std::size_t j = i; j < std::min(ks.size(), i + kPerStep); ++j) {
        OpRecord op;
        op.name = "aten::mm";
        op.external_id = next_op++;
        op.thread = cupti_thread_id();
        op.start_ns = now_ns();
        push_external_id(ExternalIdKind::Op, op.external_id);
        cupti->launch_kernel(ks[j].name.c_str(), static_cast<std::uint32_t>(ks[j].stream),
                             ks[j].end_ns - ks[j].start_ns, false);
        pop_external_id(ExternalIdKind::Op);
        op.end_ns = now_ns();
        c->add_op(std::move(op));
      }
      pop_external_id(ExternalIdKind::Phase);
      phases.push_back(classified_annotation("forward", cupti_thread_id(), begin, now_ns()));
      c->flush(false);  // the step end: no sync
    }
    cupti->wait_gpu();
    c->flush(true);  // the epoch's end

    GpuAggregator live;
    for (const AnnotationRecord& a : phases) live.add(a);
    for (const GpuActivity& b : batches) {
      live.add(b);
      live.flush();
    }
    const GpuAggregate got = live.snapshot();

    std::map<std::string, std::pair<std::int64_t, std::int64_t>> by_name;
    for (const KernelStats& k : want.kernels) by_name[k.name] = {k.count, k.total_ns};
    ASSERT_EQ(got.kernels.size(), want.kernels.size());
    std::int64_t tc_want = 0, tc_got = 0, total = 0;
    for (const KernelStats& k : want.kernels)
      if (k.kind.tensor_core) tc_want += k.total_ns;
    for (const KernelStats& k : got.kernels) {
      ASSERT_TRUE(by_name.count(k.name)) << k.name;
      EXPECT_EQ(k.count, by_name[k.name].first) << k.name;
      EXPECT_EQ(k.total_ns, by_name[k.name].second) << k.name;
      EXPECT_NE(k.name.substr(0, 2), "_Z") << "shown demangled";
      if (k.kind.tensor_core) tc_got += k.total_ns;
      total += k.total_ns;
    }
    EXPECT_EQ(tc_got, tc_want) << "Tensor Core time";
    EXPECT_GT(tc_got, 0);
    const auto& unattributed = got.phases[kUnattributed];
    EXPECT_LT(static_cast<double>(unattributed.kernel_ns), 0.01 * static_cast<double>(total))
        << unattributed.kernel_count << " kernels unattributed";
    EXPECT_EQ(got.phases[static_cast<std::size_t>(Phase::Forward)].kernel_count +
                  unattributed.kernel_count,
              static_cast<std::int64_t>(ks.size()));
    EXPECT_EQ(got.dropped_records, 0);
  }
};

TEST_F(ExportReplayTest, TheBeforeExportThroughTheLivePathMatchesItsAnalysis) {
  replay_and_compare(FATHOM_TEST_TRACES "/nsys_mfu_2gpu_before.sqlite");
}

TEST_F(ExportReplayTest, TheAfterExportThroughTheLivePathMatchesItsAnalysis) {
  replay_and_compare(FATHOM_TEST_TRACES "/nsys_mfu_2gpu_after.sqlite");
}

}  // namespace
}  // namespace fathom
