// The Nsight Systems export reader and `fathom analyze`'s export analysis: synthetic exports with
// fathom's ranges around known kernels (attribution checked exactly), the two real exports in
// tests/data/traces (checked against independent SQL), and bad input.
#include <fathom/error.h>
#include <fathom/replay.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "advise/export_analysis.h"
#include "formats/nsight/op_range_text.h"
#include "nsight_export_builder.h"

namespace fathom {
namespace {

using testing::FathomCategory;
using testing::global_tid;
using testing::NsightExportBuilder;

const std::string kTensorCoreKernel = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN";
const std::string kCudaCoreKernel =
    "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, "
    "std::array<char *, (unsigned long)3>>(int, at::native::CUDAFunctor_add<float>, "
    "std::array<char "
    "*, (unsigned long)3>)";

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("fathom_nsight_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// Two steps of one training thread in fathom's ranges, each phase launching known kernels; a
// second process whose correlation ids repeat the first's; a copy in the data gap.
std::string write_two_step_export() {
  const std::string path = temp_path("two_steps.sqlite");
  NsightExportBuilder b(path);
  const std::int64_t t = global_tid(100, 101), other = global_tid(200, 201);
  b.gpu(0, "NVIDIA H200", 9, 0);
  b.domain(5, "fathom");
  b.domain(6, "NCCL");
  b.fathom_range(900, 5000, t, "epoch 0", FathomCategory::Epoch);
  for (std::int64_t base : {1000, 3000}) {
    b.fathom_range(base, base + 1000, t, "step " + std::to_string(base / 2000),
                   FathomCategory::Step);
    b.fathom_range(base + 100, base + 400, t, "forward", FathomCategory::Phase);
    b.fathom_range(base + 400, base + 800, t, "backward", FathomCategory::Phase);
    b.fathom_range(base + 800, base + 950, t, "optimizer", FathomCategory::Phase);
  }
  // The data gap is a start/end range, as the session writes it.
  b.range(2000, 3000, t, "data", 5, static_cast<int>(FathomCategory::Phase), true,
          NsightExportBuilder::kStartEnd);
  b.range(1100, 1120, t, "ncclAllReduce", 6, 0);  // another domain: counted, not read

  // step 0: forward launches three kernels, one of which runs while backward is open.
  b.runtime(1150, 1155, t, 1, "cudaLaunchKernel_v7000");
  b.kernel(1200, 1300, 0, 7, 1, 100, kTensorCoreKernel);
  b.runtime(1160, 1165, t, 2, "cudaLaunchKernel_v7000");
  b.kernel(1300, 1350, 0, 7, 2, 100, kCudaCoreKernel);
  b.runtime(1390, 1395, t, 3, "cudaLaunchKernel_v7000");
  b.kernel(1450, 1550, 0, 7, 3, 100, kTensorCoreKernel);
  // backward: one kernel runs past the step's end.
  b.runtime(1410, 1415, t, 4, "cudaLaunchKernel_v7000");
  b.kernel(1600, 1800, 0, 7, 4, 100, kTensorCoreKernel);
  b.runtime(1420, 1425, t, 5, "cudaLaunchKernel_v7000");
  b.kernel(1800, 2000, 0, 7, 5, 100, kCudaCoreKernel);
  // optimizer: launched inside the step, runs after it.
  b.runtime(1810, 1815, t, 6, "cudaLaunchKernel_v7000");
  b.kernel(2000, 2030, 0, 7, 6, 100, kCudaCoreKernel);
  // data gap: an asynchronous pinned copy and a synchronous pageable one.
  b.runtime(2500, 2510, t, 7, "cudaMemcpyAsync_v3020");
  b.memcpy(2600, 2700, 0, 7, 100, 4096, NsightExportBuilder::kHtoD, NsightExportBuilder::kPinned,
           NsightExportBuilder::kDevice);
  b.runtime(2750, 2900, t, 8, "cudaMemcpy_v3020");
  b.memcpy(2800, 2850, 0, 8, 100, 1000, NsightExportBuilder::kDtoH, NsightExportBuilder::kDevice,
           NsightExportBuilder::kPageable);
  // step 1
  b.runtime(3150, 3155, t, 9, "cudaLaunchKernel_v7000");
  b.kernel(3200, 3300, 0, 7, 9, 100, kTensorCoreKernel);
  b.runtime(3410, 3415, t, 10, "cudaLaunchKernel_v7000");
  b.kernel(3500, 3600, 0, 7, 10, 100, kCudaCoreKernel);
  b.runtime(3420, 3425, t, 11, "cudaMemsetAsync_v3020");
  b.memset(3650, 3700, 0, 11, 100, 256);
  // Another process on device 1 reuses correlation id 1, launched while the first process's
  // forward was open: it must not inherit that phase.
  b.runtime(1156, 1158, other, 1, "cudaLaunchKernel_v7000");
  b.kernel(5000, 5100, 1, 3, 1, 200, kCudaCoreKernel);
  return path;
}

const PhaseTensorCores* phase(const GpuSummary& s, const std::string& name) {
  for (const auto& p : s.tensor_cores.phases)
    if (p.phase == name) return &p;
  return nullptr;
}

const DeviceAnalysis& device(const ExportAnalysis& a, int id) {
  for (const auto& d : a.devices)
    if (d.device == id) return d;
  throw std::runtime_error("no device");
}

TEST(NsightExport, EveryKernelLandsInThePhaseThatLaunchedIt) {
  const std::string path = write_two_step_export();
  const ExportAnalysis a = analyze_nsight_export(path, {});
  ASSERT_EQ(a.devices.size(), 2u);
  const GpuSummary& g = device(a, 0).gpu;
  // forward: 100 + 100 (the one that ran during backward) + 100 (step 1) on Tensor Cores, 50 not.
  const PhaseTensorCores* fwd = phase(g, "forward");
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->kernel_ns, 350);
  EXPECT_EQ(fwd->tensor_core_ns, 300);
  EXPECT_DOUBLE_EQ(*fwd->share, 300.0 / 350.0);
  const PhaseTensorCores* bwd = phase(g, "backward");
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ(bwd->kernel_ns, 500);
  EXPECT_EQ(bwd->tensor_core_ns, 200);
  const PhaseTensorCores* opt = phase(g, "optimizer");
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->kernel_ns, 30);
  EXPECT_EQ(opt->tensor_core_ns, 0);
  EXPECT_EQ(phase(g, "unattributed"), nullptr) << "device 0's kernels all have a phase";
  // Copies by the phase that launched them: both in the data gap.
  ASSERT_EQ(g.transfers.phases.size(), 1u);
  EXPECT_EQ(g.transfers.phases[0].phase, "data");
  EXPECT_EQ(g.transfers.phases[0].count, 2);
  EXPECT_EQ(g.transfers.phases[0].bytes, 5096);
  // The other process's kernel, whose correlation id repeats one of the first process's.
  const PhaseTensorCores* other = phase(device(a, 1).gpu, "unattributed");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->kernel_ns, 100);
  EXPECT_EQ(phase(device(a, 1).gpu, "forward"), nullptr);
  std::filesystem::remove(path);
}

TEST(NsightExport, EveryKernelLandsInTheStepThatLaunchedIt) {
  const std::string path = write_two_step_export();
  const ExportAnalysis a = analyze_nsight_export(path, {});
  const GpuSummary& g = device(a, 0).gpu;
  ASSERT_EQ(g.steps.size(), 2u);
  const StepGpu& s0 = g.steps[0];
  EXPECT_EQ(s0.name, "step 0");
  EXPECT_EQ(s0.wall_ns, 1000);
  EXPECT_EQ(s0.kernel_count, 6);
  EXPECT_EQ(s0.kernel_ns, 100 + 50 + 100 + 200 + 200 + 30);
  EXPECT_EQ(s0.tensor_core_ns, 400);
  EXPECT_DOUBLE_EQ(*s0.tensor_core_share, 400.0 / 680.0);
  EXPECT_EQ(s0.memcpy_count, 0) << "the copies were launched between the steps";
  // Busy inside [1000, 2000): 1200-1350, 1450-1550, 1600-2000.
  EXPECT_EQ(s0.busy_ns, 150 + 100 + 400);
  EXPECT_EQ(s0.idle_ns, 1000 - 650);
  const StepGpu& s1 = g.steps[1];
  EXPECT_EQ(s1.kernel_count, 2);
  EXPECT_EQ(s1.kernel_ns, 200);
  EXPECT_EQ(s1.tensor_core_ns, 100);
  EXPECT_EQ(s1.busy_ns, 100 + 100 + 50) << "the memset counts as busy";
  // The device's window is the steps; the report epoch has both steps and the three phases.
  EXPECT_TRUE(g.timeline.window_from_steps);
  const EpochSummary& e = a.report.epochs.at(0);
  EXPECT_EQ(e.steps, 2);
  EXPECT_DOUBLE_EQ(e.step_ms_total, 2000 / 1e6);
  EXPECT_EQ(e.phase(Phase::Forward).count, 2);
  EXPECT_DOUBLE_EQ(e.phase(Phase::Backward).wall_ms_total, 800 / 1e6);
  EXPECT_EQ(e.phase(Phase::Data).count, 1);
  EXPECT_EQ(a.info.fathom_ranges, 10);
  EXPECT_EQ(a.info.other_domain_ranges, 1);
  std::filesystem::remove(path);
}

TEST(NsightExport, EnumsAreDecodedThroughTheExportsOwnTables) {
  const std::string path = write_two_step_export();
  NsightExportInfo info;
  const GpuActivity act = load_nsight_export(path, &info);
  ASSERT_EQ(act.memcpys.size(), 2u);
  EXPECT_EQ(act.memcpys[0].kind, MemcpyKind::HostToDevice);
  EXPECT_EQ(act.memcpys[0].src, MemoryKind::Pinned);
  EXPECT_EQ(act.memcpys[0].dst, MemoryKind::Device);
  EXPECT_TRUE(act.memcpys[0].async) << "cudaMemcpyAsync";
  EXPECT_EQ(act.memcpys[1].kind, MemcpyKind::DeviceToHost);
  EXPECT_EQ(act.memcpys[1].dst, MemoryKind::Pageable);
  EXPECT_FALSE(act.memcpys[1].async) << "cudaMemcpy";
  // Runtime names lose Nsight's API version; the device's name comes from TARGET_INFO_GPU.
  EXPECT_EQ(act.runtime_calls.front().name, "cudaLaunchKernel");
  ASSERT_EQ(act.devices.size(), 1u);
  EXPECT_EQ(act.devices[0].name, "NVIDIA H200");
  EXPECT_EQ(act.devices[0].compute_major, 9);
  EXPECT_TRUE(info.device_table);
  EXPECT_EQ(info.nsys_version, "2099.1.0-test");
  EXPECT_EQ(info.devices, (std::vector<std::int32_t>{0, 1}));
  std::filesystem::remove(path);
}

TEST(NsightExport, RecordsComeInTimeOrderInBoundedBatches) {
  const std::string path = write_two_step_export();
  NsightReadOptions o;
  o.batch_records = 3;
  std::int64_t last = -1, batches = 0;
  bool ordered = true;
  read_nsight_export(
      path,
      [&](GpuActivity&& b) {
        ++batches;
        const std::size_t n = b.kernels.size() + b.memcpys.size() + b.memsets.size() +
                              b.runtime_calls.size() + b.annotations.size() + b.ops.size();
        EXPECT_LE(n, 3u);
        for (const auto& k : b.kernels) {
          ordered = ordered && k.start_ns >= last;
          last = k.start_ns;
        }
      },
      o);
  EXPECT_TRUE(ordered);
  EXPECT_GT(batches, 5);
  std::filesystem::remove(path);
}

TEST(NsightExport, OneDevicesPassReadsOnlyItsProcesses) {
  const std::string path = write_two_step_export();
  NsightReadOptions o;
  o.device = 1;
  const GpuActivity act = [&] {
    GpuActivity all;
    read_nsight_export(
        path,
        [&](GpuActivity&& b) {
          for (auto& k : b.kernels) all.kernels.push_back(k);
          for (auto& r : b.runtime_calls) all.runtime_calls.push_back(r);
          for (auto& a : b.annotations) all.annotations.push_back(a);
        },
        o);
    return all;
  }();
  ASSERT_EQ(act.kernels.size(), 1u);
  EXPECT_EQ(act.kernels[0].device, 1);
  ASSERT_EQ(act.runtime_calls.size(), 1u) << "only process 200's launch";
  EXPECT_EQ(act.runtime_calls[0].thread, static_cast<std::uint64_t>(global_tid(200, 201)));
  EXPECT_TRUE(act.annotations.empty()) << "process 100's ranges stay with device 0";
  std::filesystem::remove(path);
}

// fathom's op callback registers each op's name once and sends the sequence number as the range's
// int64 payload: the reader takes the name from the string table and the number from the payload,
// for qualified ATen names and for autograd nodes ("AddmmBackward0") alike.
TEST(NsightExport, FathomOpRangesTakeTheSequenceNumberFromThePayload) {
  const std::string path = temp_path("op_payloads.sqlite");
  {
    NsightExportBuilder b(path);
    const std::int64_t t = global_tid(100, 101);
    b.gpu(0, "NVIDIA H200", 9, 0);
    b.domain(5, "fathom");
    b.fathom_range(1000, 2000, t, "forward", FathomCategory::Phase);
    b.fathom_op(1100, 1200, t, "aten::addmm", 12);
    b.fathom_op(1300, 1400, t, "aten::empty", -1);
    b.fathom_op(1500, 1600, t, "AddmmBackward0", 12);
    b.fathom_op(1700, 1800, t, "aten::mm, seq = 7 [[4, 8], [8, 2]]", 99);  // with shapes: the text
  }
  std::vector<OpRecord> ops;
  read_nsight_export(path, [&](GpuActivity&& b) {
    for (auto& o : b.ops) ops.push_back(std::move(o));
  });
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].name, "aten::addmm");
  EXPECT_EQ(ops[0].sequence_nr, 12);
  EXPECT_EQ(ops[1].name, "aten::empty");
  EXPECT_EQ(ops[1].sequence_nr, -1);
  EXPECT_EQ(ops[2].name, "AddmmBackward0");
  EXPECT_EQ(ops[2].sequence_nr, 12);
  EXPECT_EQ(ops[3].name, "aten::mm");
  EXPECT_EQ(ops[3].sequence_nr, 7);
  EXPECT_EQ(ops[3].input_shapes, (std::vector<std::vector<std::int64_t>>{{4, 8}, {8, 2}}));
  std::filesystem::remove(path);
}

TEST(OpRangeText, ReadsEmitNvtxAndFathomsOwnFormat) {
  auto a = detail::parse_op_range_text(
      "aten::mm, seq = 4, op_id = 9, sizes = [[64, 128], [128, 256]], input_op_ids = [(1, 0)]");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "aten::mm");
  EXPECT_EQ(a->sequence_nr, 4);
  EXPECT_EQ(a->input_shapes, (std::vector<std::vector<std::int64_t>>{{64, 128}, {128, 256}}));
  auto b = detail::parse_op_range_text("aten::addmm, seq = 12 [[8], [4, 16], []]");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->sequence_nr, 12);
  EXPECT_EQ(b->input_shapes, (std::vector<std::vector<std::int64_t>>{{8}, {4, 16}, {}}));
  auto c = detail::parse_op_range_text("detach_, op_id = 990725");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->name, "detach_");
  EXPECT_EQ(c->sequence_nr, -1);
  EXPECT_FALSE(detail::parse_op_range_text("forward")) << "a user's range is not an op";
  auto broken = detail::parse_op_range_text("aten::mm, sizes = [[64, x]]");
  ASSERT_TRUE(broken);
  EXPECT_TRUE(broken->input_shapes.empty()) << "a malformed list gives no shapes, not half";
}

// --- bad input ---

std::string error_of(const std::string& path) {
  try {
    load_nsight_export(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NsightExportBadInput, NotSqlite) {
  const std::string path = temp_path("not.sqlite");
  std::ofstream(path) << "{\"traceEvents\": []}";
  // Named as an export, it is refused as one (nsight_import_test.cpp has empty and random files).
  EXPECT_THROW((void)is_sqlite_file(path), Error);
  EXPECT_NE(error_of(path).find("not a database"), std::string::npos) << error_of(path);
  std::filesystem::remove(path);
}

TEST(NsightExportBadInput, SqliteThatIsNotAnExport) {
  const std::string path = temp_path("other.sqlite");
  std::filesystem::remove(path);
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db, "CREATE TABLE t (x); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  EXPECT_TRUE(is_sqlite_file(path));
  const std::string e = error_of(path);
  EXPECT_NE(e.find("not an Nsight Systems export"), std::string::npos) << e;
  EXPECT_NE(e.find("nsys export --type sqlite"), std::string::npos) << e;
  std::filesystem::remove(path);
}

TEST(NsightExportBadInput, AMissingEnumTableIsNamed) {
  const std::string path = temp_path("no_enums.sqlite");
  {
    NsightExportBuilder b(path, /*with_enums=*/false);
    b.exec("DROP TABLE NVTX_EVENTS;");  // else its own enum table is the first one missing
    b.memcpy(10, 20, 0, 1, 1, 64, 7, 0, 6);
  }
  const std::string e = error_of(path);
  EXPECT_NE(e.find("ENUM_CUDA_MEMCPY_OPER"), std::string::npos) << e;
  EXPECT_NE(e.find("copyKind"), std::string::npos) << e;
  std::filesystem::remove(path);
}

TEST(NsightExportBadInput, AMissingRequiredColumnIsNamed) {
  const std::string path = temp_path("old_schema.sqlite");
  {
    NsightExportBuilder b(path);
    b.exec(
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL "
        "(start INTEGER, end INTEGER, deviceId INTEGER, shortName INTEGER);");
  }
  const std::string e = error_of(path);
  EXPECT_NE(e.find("CUPTI_ACTIVITY_KIND_KERNEL has no column streamId"), std::string::npos) << e;
  std::filesystem::remove(path);
}

TEST(NsightExportBadInput, AbsurdRowsAreSkippedAndCounted) {
  const std::string path = temp_path("absurd.sqlite");
  {
    NsightExportBuilder b(path);
    b.kernel(100, 50, 0, 7, 1, 1, kCudaCoreKernel);        // end before start
    b.kernel(-10, 50, 0, 7, 2, 1, kCudaCoreKernel);        // negative timestamp
    b.kernel(10, INT64_MAX, 0, 7, 6, 1, kCudaCoreKernel);  // past any clock
    b.kernel(100, 150, 0, 7, 3, 1, kCudaCoreKernel);       // fine
    b.kernel(200, 250, -4, 7, 4, 1, kCudaCoreKernel);      // device out of range
    b.exec(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (300, 350, 0, 1, 7, 5, 0, 999999, "
        "999999, 1, 1, 1, 1, 1, 1, NULL)");  // a name that references nothing
    b.exec(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, domainId) VALUES "
        "(10, NULL, 59, 'never ended', 0)");
    b.memcpy(400, 500, 0, 9, 1, -5, NsightExportBuilder::kHtoD, 0, 6);  // negative bytes
  }
  NsightExportInfo info;
  const GpuActivity act = load_nsight_export(path, &info);
  EXPECT_EQ(act.kernels.size(), 1u);
  EXPECT_TRUE(act.memcpys.empty());
  EXPECT_EQ(info.skipped_rows, 7);
  std::string all;
  for (const auto& s : info.skipped) all += s + "\n";
  EXPECT_NE(all.find("1 kernel row: end before start"), std::string::npos) << all;
  EXPECT_NE(all.find("2 kernel rows: timestamp out of range"), std::string::npos) << all;
  EXPECT_NE(all.find("1 kernel row: name references no string"), std::string::npos) << all;
  EXPECT_NE(all.find("1 NVTX range row: never ended"), std::string::npos) << all;
  EXPECT_NE(all.find("1 memcpy row: value out of range"), std::string::npos) << all;
  std::filesystem::remove(path);
}

TEST(NsightExportBadInput, ATruncatedExportIsAClearError) {
  const std::string path = temp_path("truncated.sqlite");
  std::filesystem::copy_file(std::string(FATHOM_TEST_TRACES) + "/nsys_mfu_2gpu_before.sqlite", path,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(path, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 3);
  const std::string e = error_of(path);
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("damaged or truncated"), std::string::npos) << e;
  std::filesystem::remove(path);
}

TEST(NsightExportBadInput, ALockedExportIsAClearError) {
  const std::string path = write_two_step_export();
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &writer), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(writer, "BEGIN EXCLUSIVE;", nullptr, nullptr, nullptr), SQLITE_OK);
  const std::string e = error_of(path);
  EXPECT_NE(e.find("another process holds the file"), std::string::npos) << e;
  sqlite3_exec(writer, "COMMIT;", nullptr, nullptr, nullptr);
  sqlite3_close(writer);
  std::filesystem::remove(path);
}

// --- the real exports, against independent SQL ---

struct Sql {
  explicit Sql(const std::string& path) {
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  }
  ~Sql() { sqlite3_close(db); }
  std::vector<std::vector<std::int64_t>> rows(const std::string& q) {
    std::vector<std::vector<std::int64_t>> out;
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, q.c_str(), -1, &s, nullptr), SQLITE_OK) << q;
    while (sqlite3_step(s) == SQLITE_ROW) {
      std::vector<std::int64_t> r;
      for (int i = 0; i < sqlite3_column_count(s); ++i) r.push_back(sqlite3_column_int64(s, i));
      out.push_back(r);
    }
    sqlite3_finalize(s);
    return out;
  }
  sqlite3* db = nullptr;
};

class RealExport : public ::testing::TestWithParam<const char*> {
 protected:
  std::string path() const { return std::string(FATHOM_TEST_TRACES) + "/" + GetParam(); }
};

TEST_P(RealExport, KernelsPerDeviceEqualTheExportsOwnCounts) {
  const ExportAnalysis a = analyze_nsight_export(path(), {});
  Sql sql(path());
  const auto want = sql.rows(
      "SELECT deviceId, count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY "
      "deviceId ORDER BY deviceId");
  ASSERT_EQ(a.devices.size(), want.size());
  for (const auto& w : want) {
    const GpuSummary& g = device(a, static_cast<int>(w[0])).gpu;
    EXPECT_EQ(g.timeline.kernel_count, w[1]) << "device " << w[0];
    EXPECT_EQ(g.tensor_cores.kernel_ns + g.timeline.communication_ns, w[2]) << "device " << w[0];
  }
  EXPECT_EQ(a.info.skipped_rows, 0);
}

TEST_P(RealExport, CopiesByDirectionAndMemoryKindEqualTheExportsOwnCounts) {
  const ExportAnalysis a = analyze_nsight_export(path(), {});
  Sql sql(path());
  // Decoded in SQL through the export's enum tables, independently of the reader.
  const auto want = sql.rows(
      "SELECT CASE k.name WHEN 'CUDA_MEMCPY_KIND_HTOD' THEN 1 WHEN 'CUDA_MEMCPY_KIND_DTOH' THEN 2 "
      "WHEN 'CUDA_MEMCPY_KIND_DTOD' THEN 3 ELSE 9 END, "
      "CASE WHEN k.name = 'CUDA_MEMCPY_KIND_HTOD' THEN s.name ELSE d.name END = "
      "'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', count(*), sum(m.bytes) "
      "FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN ENUM_CUDA_MEMCPY_OPER k ON k.id = m.copyKind "
      "JOIN ENUM_CUDA_MEM_KIND s ON s.id = m.srcKind JOIN ENUM_CUDA_MEM_KIND d ON d.id = m.dstKind "
      "GROUP BY 1, 2");
  ASSERT_FALSE(want.empty());
  const GpuSummary& g = a.report.epochs.at(0).gpu.value();
  std::map<std::pair<int, bool>, std::pair<std::int64_t, std::int64_t>> got;
  for (const TransferRow& r : g.transfers.rows) {
    const int dir = r.direction == MemcpyKind::HostToDevice     ? 1
                    : r.direction == MemcpyKind::DeviceToHost   ? 2
                    : r.direction == MemcpyKind::DeviceToDevice ? 3
                                                                : 9;
    auto& c = got[{dir, dir != 3 && r.host_memory == MemoryKind::Pageable}];
    c.first += r.count;
    c.second += r.bytes;
  }
  for (const auto& w : want) {
    const auto& c = got[{static_cast<int>(w[0]), w[1] != 0}];
    EXPECT_EQ(c.first, w[2]) << "direction " << w[0] << " pageable " << w[1];
    EXPECT_EQ(c.second, w[3]) << "direction " << w[0] << " pageable " << w[1];
  }
}

TEST_P(RealExport, BusyTimeIsTheUnionOfKernelCopyAndMemsetIntervals) {
  const ExportAnalysis a = analyze_nsight_export(path(), {});
  Sql sql(path());
  for (const DeviceAnalysis& d : a.devices) {
    const auto rows = sql.rows(
        "SELECT start, end FROM (SELECT start, end, deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "UNION ALL SELECT start, end, deviceId FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL SELECT "
        "start, end, deviceId FROM CUPTI_ACTIVITY_KIND_MEMSET) WHERE deviceId = " +
        std::to_string(d.device) + " ORDER BY start");
    std::int64_t total = 0, seg_start = -1, seg_end = -1;
    for (const auto& r : rows) {
      if (r[0] > seg_end) {
        if (seg_end > seg_start) total += seg_end - seg_start;
        seg_start = r[0];
        seg_end = r[1];
      } else {
        seg_end = std::max(seg_end, r[1]);
      }
    }
    if (seg_end > seg_start) total += seg_end - seg_start;
    ASSERT_EQ(d.gpu.timeline.devices.size(), 1u);
    EXPECT_EQ(d.gpu.timeline.devices[0].busy_ns, total) << "device " << d.device;
  }
}

// Issue 23 items 6 and 7 on the real two-GPU exports: no whole-export share passes 100% (nor
// any gain the advisor makes of one), and each device's host synchronizations are those of the
// process that used it (the rows say deviceId 0 for both), as plain SQL counts them: the rows of
// waits, not those of event and stream queries (polls that return at once).
TEST_P(RealExport, WholeExportSharesAreUnionsAndSyncsFollowTheirProcess) {
  const ExportAnalysis a = analyze_nsight_export(path(), {});
  const EpochSummary& e = a.report.epochs.front();
  const GpuSummary& g = *e.gpu;
  for (const auto& share : {g.transfers.share_of_window, g.timeline.communication_share})
    if (share) EXPECT_LE(*share, 1.0);
  EXPECT_LE(g.timeline.sync_record_ns, g.timeline.window_ns);
  EXPECT_LE(g.timeline.sync_call_ns, g.timeline.window_ns);
  for (const Finding& f : e.findings)
    if (f.gain_fraction) EXPECT_LE(*f.gain_fraction, 1.0) << f.id << ": " << f.estimated_gain;
  Sql sql(path());
  for (const DeviceAnalysis& d : a.devices) {
    const auto want = sql.rows(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION s JOIN ENUM_CUPTI_SYNC_TYPE t "
        "ON s.syncType = t.id WHERE t.name NOT LIKE '%STREAM_WAIT_EVENT' AND (s.globalPid >> 24) "
        "IN (SELECT DISTINCT globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = " +
        std::to_string(d.device) +
        ") AND NOT EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds n ON "
        "r.nameId = n.id WHERE r.correlationId = s.correlationId AND (r.globalTid >> 24) = "
        "(s.globalPid >> 24) AND n.value LIKE 'cu%Query%')");
    EXPECT_EQ(d.gpu.timeline.sync_records, want[0][0]) << "device " << d.device;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RealExport,
                         ::testing::Values("nsys_mfu_2gpu_before.sqlite",
                                           "nsys_mfu_2gpu_after.sqlite"));

}  // namespace
}  // namespace fathom
