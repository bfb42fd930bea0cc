// The Nsight import across devices and at its edges (issue 23, items 6-9): whole-export figures of
// a two-GPU export as unions across devices, host synchronizations by process, copies whose
// launching call is missing, a dropped kernel table, a file named .sqlite that is none, rows on no
// real device, the NVTX ranges' name table, and `fathom diff` judging analyses by time per call.
// Each export is written for its test (tests/support/nsight_export_builder.h).
#include <fathom/error.h>
#include <fathom/replay.h>
#include <fathom/report_diff.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "advise/advisor.h"
#include "advise/export_analysis.h"
#include "nsight_export_builder.h"
#include "report/analysis_json.h"

namespace fathom {
namespace {

using testing::FathomCategory;
using testing::global_tid;
using testing::NsightExportBuilder;

const std::string kGemm = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN";
const std::string kAllReduce =
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("fathom_nsight_import_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const DeviceAnalysis& device(const ExportAnalysis& a, int id) {
  for (const auto& d : a.devices)
    if (d.device == id) return d;
  throw std::runtime_error("no device " + std::to_string(id));
}

// Two ranks in one export, as `nsys profile` of a torchrun job writes it: process 100 on device
// 0, process 200 on device 1, one step each over [1000, 2000). In that window each device copies
// [1100, 1900), runs an all-reduce [1200, 1700) and a GEMM, and each process blocks in a stream
// synchronization [1000, 1800) whose row says deviceId 0 (as real exports write it).
std::string write_two_rank_export() {
  const std::string path = temp_path("two_ranks.sqlite");
  NsightExportBuilder b(path);
  b.gpu(0, "NVIDIA H100", 9, 0);
  b.gpu(1, "NVIDIA H100", 9, 0);
  b.domain(5, "fathom");
  for (int rank : {0, 1}) {
    const std::int64_t pid = 100 * (rank + 1), t = global_tid(pid, pid + 1);
    b.fathom_range(1000, 2000, t, "step 0", FathomCategory::Step);
    b.runtime(1010, 1020, t, 1, "cudaMemcpyAsync_v3020");
    b.memcpy(1100, 1900, rank, 1, pid, 1 << 20, NsightExportBuilder::kHtoD,
             NsightExportBuilder::kPinned, NsightExportBuilder::kDevice);
    b.runtime(1030, 1040, t, 2, "cudaLaunchKernel_v7000");
    b.kernel(1200, 1700, rank, 9, 2, pid, kAllReduce);
    b.runtime(1050, 1060, t, 3, "cudaLaunchKernel_v7000");
    b.kernel(1100, 1150, rank, 7, 3, pid, kGemm);
    b.sync(1000, 1800, pid, 4);
  }
  return path;
}

// Item 6: no whole-export share passes 100%, and the advisor's gains neither.
TEST(NsightImport, WholeExportFiguresOfTwoDevicesAreUnionsAcrossThem) {
  const std::string path = write_two_rank_export();
  const ExportAnalysis a = analyze_nsight_export(path, {});
  ASSERT_EQ(a.devices.size(), 2u);
  const EpochSummary& e = a.report.epochs.front();
  const GpuSummary& g = *e.gpu;
  ASSERT_EQ(g.timeline.window_ns, 1000);
  // Both devices copy over the same 800 ns: the export copied during 80% of the window, not 160%.
  EXPECT_EQ(g.transfers.busy_ns, 800);
  ASSERT_TRUE(g.transfers.share_of_window);
  EXPECT_DOUBLE_EQ(*g.transfers.share_of_window, 0.8);
  ASSERT_TRUE(g.timeline.communication_share);
  EXPECT_DOUBLE_EQ(*g.timeline.communication_share, 0.5);
  EXPECT_EQ(g.timeline.sync_record_ns, 800);
  for (const Finding& f : e.findings)
    if (f.gain_fraction) EXPECT_LE(*f.gain_fraction, 1.0) << f.id << ": " << f.estimated_gain;
  // Each device alone keeps its own figures.
  for (int d : {0, 1}) {
    const GpuSummary& dg = device(a, d).gpu;
    EXPECT_EQ(dg.transfers.busy_ns, 800) << d;
    ASSERT_TRUE(dg.transfers.share_of_window) << d;
    EXPECT_DOUBLE_EQ(*dg.transfers.share_of_window, 0.8) << d;
  }
  std::filesystem::remove(path);
}

// Item 7: device 1's host synchronizations are its own process's, whatever deviceId says.
TEST(NsightImport, SynchronizationsGoWithTheProcessThatWaited) {
  const std::string path = write_two_rank_export();
  const ExportAnalysis a = analyze_nsight_export(path, {});
  ASSERT_EQ(a.devices.size(), 2u);
  for (int d : {0, 1}) {
    EXPECT_EQ(device(a, d).gpu.timeline.sync_records, 1) << "device " << d;
    EXPECT_EQ(device(a, d).gpu.timeline.sync_record_ns, 800) << "device " << d;
  }
  std::filesystem::remove(path);
}

// Item 8: a large host-to-device copy whose call is not in the export is neither synchronous nor
// asynchronous; the same copy with its cudaMemcpy is synchronous.
TEST(NsightImport, ACopyWithoutItsCallStaysUnknown) {
  for (const bool with_call : {false, true}) {
    const std::string path = temp_path("copy_call.sqlite");
    {
      NsightExportBuilder b(path);
      b.gpu(0, "NVIDIA H100", 9, 0);
      const std::int64_t t = global_tid(100, 101);
      if (with_call) b.runtime(1000, 3000, t, 1, "cudaMemcpy_v3020");
      b.memcpy(1100, 2900, 0, 1, 100, 64 << 20, NsightExportBuilder::kHtoD,
               NsightExportBuilder::kPinned, NsightExportBuilder::kDevice);
      b.runtime(3000, 3010, t, 2, "cudaLaunchKernel_v7000");
      b.kernel(3100, 9000, 0, 7, 2, 100, kGemm);
    }
    const ExportAnalysis a = analyze_nsight_export(path, {});
    const EpochSummary& e = a.report.epochs.front();
    const TransferResult& t = e.gpu->transfers;
    ASSERT_EQ(t.count, 1);
    ASSERT_EQ(t.directions.size(), 1u);
    ASSERT_EQ(t.rows.size(), 1u);
    const bool finding = std::any_of(e.findings.begin(), e.findings.end(), [](const Finding& f) {
      return f.id == finding_id::kCopySynchronous;
    });
    if (with_call) {
      EXPECT_EQ(t.large_sync_h2d_count, 1);
      EXPECT_EQ(t.directions[0].sync_count, 1);
      EXPECT_TRUE(t.rows[0].async_known);
      EXPECT_TRUE(finding);
    } else {
      EXPECT_EQ(t.large_sync_h2d_count, 0);
      EXPECT_EQ(t.directions[0].sync_count, 0);
      EXPECT_EQ(t.directions[0].async_count, 0);
      EXPECT_EQ(t.directions[0].unknown_call_count, 1);
      EXPECT_FALSE(t.rows[0].async_known);
      EXPECT_FALSE(finding) << "no copy.synchronous from a copy whose call is unknown";
    }
    std::filesystem::remove(path);
  }
}

// CUDA 13's CUPTI writes an EVENT_SYNCHRONIZE row for each cudaEventQuery (every such row of the
// two real exports is a query's): a poll that returns at once is no host wait. The GPU going
// idle during one was "synchronization" in `fathom analyze`, never on the live path (whose
// CUPTI parser reads waits from the calls). Here the GPU idles [2000, 3000) while the host polls
// an event, then launches late; and [4000, 5100) while it waits in cudaStreamSynchronize (the
// window starts at the first launch, 900).
TEST(NsightImport, AnEventQueryIsNoHostWait) {
  const std::string path = temp_path("event_query.sqlite");
  {
    NsightExportBuilder b(path);
    b.gpu(0, "NVIDIA H100", 9, 0);
    const std::int64_t t = global_tid(100, 101);
    b.runtime(900, 910, t, 1, "cudaLaunchKernel_v7000");
    b.kernel(1000, 2000, 0, 7, 1, 100, kGemm);
    b.runtime(1990, 2010, t, 2, "cudaEventQuery_v3020");
    b.sync(1995, 2005, 100, 2, NsightExportBuilder::kEventSync);
    b.runtime(2900, 2910, t, 3, "cudaLaunchKernel_v7000");
    b.kernel(3000, 4000, 0, 7, 3, 100, kGemm);
    b.runtime(3950, 5000, t, 4, "cudaStreamSynchronize_v3020");
    b.sync(3960, 4990, 100, 4, NsightExportBuilder::kStreamSync);
    b.runtime(5050, 5060, t, 5, "cudaLaunchKernel_v7000");
    b.kernel(5100, 6000, 0, 7, 5, 100, kGemm);
  }
  const ExportAnalysis a = analyze_nsight_export(path, {});
  const TimelineResult& t = a.report.epochs.front().gpu->timeline;
  EXPECT_EQ(t.sync_records, 1) << "the stream synchronization's row, not the query's";
  EXPECT_EQ(t.sync_record_ns, 1030);
  EXPECT_EQ(t.sync_calls, 1);
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].idle.gaps, 3);  // and [900, 1000) before the first kernel
  EXPECT_EQ(t.devices[0].idle.host_launch_ns, 100 + 1000) << "the poll's gap: a late launch";
  EXPECT_EQ(t.devices[0].idle.sync_ns, 1100) << "the wait's gap";
  std::filesystem::remove(path);
}

// Item 9: a dropped kernel table is a "not measured" line, not a clean analysis of 0 kernels.
TEST(NsightImport, ADroppedKernelTableIsNotMeasured) {
  const std::string path = temp_path("no_kernels.sqlite");
  {
    NsightExportBuilder b(path);
    b.exec("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;");
    b.runtime(1000, 1010, global_tid(100, 101), 1, "cudaMemcpyAsync_v3020");
    b.memcpy(1100, 1200, 0, 1, 100, 4096, NsightExportBuilder::kHtoD, NsightExportBuilder::kPinned,
             NsightExportBuilder::kDevice);
  }
  const ExportAnalysis a = analyze_nsight_export(path, {});
  EXPECT_FALSE(a.info.kernel_table);
  auto kernels = [](const std::vector<Unmeasured>& v) {
    return std::any_of(v.begin(), v.end(), [](const Unmeasured& u) {
      return u.what == "GPU kernels" &&
             u.why.find("CUPTI_ACTIVITY_KIND_KERNEL") != std::string::npos;
    });
  };
  EXPECT_TRUE(kernels(a.report.epochs.front().gpu->not_measured));
  std::filesystem::remove(path);
}

// Item 9: an empty or random file named .sqlite is "not an Nsight Systems export", not JSON.
TEST(NsightImport, AnEmptyOrRandomSqliteFileIsNotAnExport) {
  for (const std::string& bytes : {std::string(), std::string("\x93\x11\x00\xfe random", 11)}) {
    const std::string path = temp_path("random.sqlite");
    std::ofstream(path, std::ios::binary) << bytes;
    for (const std::string& e : {error_of([&] { (void)is_sqlite_file(path); }),
                                 error_of([&] { (void)load_trace(path); })}) {
      EXPECT_NE(e.find("is not an Nsight Systems export"), std::string::npos) << e;
      EXPECT_EQ(e.find("JSON"), std::string::npos) << e;
    }
    std::filesystem::remove(path);
  }
}

// Item 9: a kernel row on deviceId -3 is skipped and counted; it makes no device "cuda:-3".
TEST(NsightImport, RowsOnNoRealDeviceAreSkippedAndCounted) {
  const std::string path = temp_path("bad_device.sqlite");
  {
    NsightExportBuilder b(path);
    b.gpu(0, "NVIDIA H100", 9, 0);
    const std::int64_t t = global_tid(100, 101);
    b.runtime(1000, 1010, t, 1, "cudaLaunchKernel_v7000");
    b.kernel(1100, 1200, 0, 7, 1, 100, kGemm);
    b.runtime(1020, 1030, t, 2, "cudaLaunchKernel_v7000");
    b.kernel(1200, 1300, -3, 7, 2, 100, kGemm);
  }
  const ExportAnalysis a = analyze_nsight_export(path, {});
  EXPECT_EQ(a.info.devices, std::vector<std::int32_t>{0});
  EXPECT_TRUE(a.devices.empty()) << "one real device: no per-device sections";
  EXPECT_EQ(a.info.skipped_rows, 1);
  EXPECT_EQ(a.report.environment.device, "cuda:0");
  std::filesystem::remove(path);
}

// Item 9: the NVTX ranges by name, emit_nvtx's ", seq = N, op_id = N" cut off, in the JSON too.
TEST(NsightImport, NvtxRangesAreANameTable) {
  const std::string path = temp_path("ranges.sqlite");
  {
    NsightExportBuilder b(path);
    const std::int64_t t = global_tid(100, 101);
    b.range(1000, 1100, t, "aten::mm, seq = 5, op_id = 7", 0, 0);
    b.range(1200, 1500, t, "aten::mm, seq = 6, op_id = 9", 0, 0);
    b.range(1000, 3000, t, "my_region", 0, 0);
    b.runtime(1010, 1020, t, 1, "cudaLaunchKernel_v7000");
    b.kernel(1100, 1200, 0, 7, 1, 100, kGemm);
  }
  const ExportAnalysis a = analyze_nsight_export(path, {});
  EXPECT_EQ(a.info.nvtx_ranges, 3);
  ASSERT_EQ(a.info.range_names.size(), 2u);
  EXPECT_EQ(a.info.range_names[0].name, "my_region");
  EXPECT_EQ(a.info.range_names[0].count, 1);
  EXPECT_EQ(a.info.range_names[0].total_ns, 2000);
  EXPECT_EQ(a.info.range_names[1].name, "aten::mm");
  EXPECT_EQ(a.info.range_names[1].count, 2);
  EXPECT_EQ(a.info.range_names[1].total_ns, 400);
  const EpochSummary& e = a.report.epochs.front();
  const AnalysisDocument back = parse_analysis_json(
      format_analysis_json({path, *e.gpu, a.devices, e.findings, a.info}), "ranges.json");
  ASSERT_TRUE(back.nsight);
  ASSERT_EQ(back.nsight->range_names.size(), 2u);
  EXPECT_EQ(back.nsight->range_names[1].name, "aten::mm");
  EXPECT_EQ(back.nsight->range_names[1].count, 2);
  std::filesystem::remove(path);
}

// Item 9: fewer kernels is not better when each call got slower and the devices less busy; the
// kernels that took the time have rows of their own.
TEST(NsightImport, DiffJudgesByTimePerCallAndBusyShareNotKernelCount) {
  auto summary = [](std::int64_t calls, std::int64_t ns_per_call, double busy) {
    GpuSummary g;
    g.gpu_activity = true;
    g.tensor_cores.kernel_count = calls;
    g.tensor_cores.kernel_ns = calls * ns_per_call;
    TopKernel k;
    k.name = kGemm;
    k.count = calls;
    k.total_ns = calls * ns_per_call;
    g.tensor_cores.top_kernels.push_back(k);
    DeviceTimeline d;
    d.busy_share = busy;
    g.timeline.devices.push_back(d);
    g.timeline.window_ns = 10'000'000;
    return g;
  };
  const std::vector<MetricChange> m =
      diff_gpu_summaries(summary(100, 10'000, 0.5), summary(50, 30'000, 0.4));
  auto find = [&](const std::string& name) -> const MetricChange* {
    for (const MetricChange& c : m)
      if (c.name == name) return &c;
    return nullptr;
  };
  const MetricChange* kernels = find("kernels");
  ASSERT_TRUE(kernels);
  EXPECT_EQ(kernels->verdict(0.02), 0) << "a kernel count is shown, not judged";
  const MetricChange* per_call = find("compute time per kernel call");
  ASSERT_TRUE(per_call);
  EXPECT_EQ(per_call->verdict(0.02), -1);
  const MetricChange* busy = find("devices busy (mean)");
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->verdict(0.02), -1);
  const auto row = std::find_if(m.begin(), m.end(), [](const MetricChange& c) {
    return c.section == "kernels" && c.name.ends_with(" per call");
  });
  ASSERT_NE(row, m.end());
  EXPECT_DOUBLE_EQ(*row->a, 10.0);
  EXPECT_DOUBLE_EQ(*row->b, 30.0);
  EXPECT_EQ(row->verdict(0.02), -1);
}

}  // namespace
}  // namespace fathom
