// What reading an Nsight export may spend (NsightReadBudget, issue 25): only real tables are read,
// and rows, time, the longest value and SQLite's temporary files each have a budget; past one the
// read ends with a fathom::Error that says which, instead of growing memory, disk or time.
#include <fathom/error.h>
#include <fathom/replay.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "advise/export_analysis.h"
#include "nsight_export_builder.h"

namespace fathom {
namespace {

using testing::global_tid;
using testing::NsightExportBuilder;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("fathom_nsight_budget_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string error_of(const std::string& path, const NsightReadBudget& budget = {}) {
  NsightReadOptions o;
  o.budget = budget;
  try {
    read_nsight_export(
        path, [](GpuActivity&&) {}, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// An export of `kernels` kernel rows whose starts are out of order, so that the reader's ORDER BY
// sorts them (and spills to temporary files past SQLite's 8 MiB cache).
std::string write_many_kernels(const std::string& name, std::int64_t kernels) {
  const std::string path = temp_path(name);
  NsightExportBuilder b(path);
  const std::int64_t n = b.string("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN");
  b.exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT (x * 7919) % " + std::to_string(kernels) +
         " * 1000, (x * 7919) % " + std::to_string(kernels) +
         " * 1000 + 500, 0, 1, 7, x, 16777216, " + std::to_string(n) + ", " + std::to_string(n) +
         ", 1, 1, 1, 128, 1, 1, NULL FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
         "FROM c WHERE x < " +
         std::to_string(kernels) + ") SELECT x FROM c)");
  return path;
}

TEST(NsightBudget, AViewInPlaceOfATableIsRefused) {
  const std::string path = temp_path("view.sqlite");
  {
    NsightExportBuilder b(path);
    b.kernel(1000, 2000, 0, 7, 1, 100, "k");
    // Finite here; a recursive one would never end.
    b.exec(
        "CREATE TABLE names AS SELECT * FROM StringIds; DROP TABLE StringIds; "
        "CREATE VIEW StringIds AS SELECT id, value FROM names;");
  }
  const std::string e = error_of(path);
  EXPECT_NE(e.find("StringIds is a view, not a table"), std::string::npos) << e;
  std::filesystem::remove(path);
}

TEST(NsightBudget, RowsPastTheBudgetAreRefused) {
  const std::string path = write_many_kernels("rows.sqlite", 100);
  EXPECT_EQ(error_of(path), "");
  NsightReadBudget budget;
  budget.rows = 50;
  const std::string e = error_of(path, budget);
  EXPECT_NE(e.find("more than 50 rows"), std::string::npos) << e;
  std::filesystem::remove(path);
}

TEST(NsightBudget, AReadPastItsTimeIsInterrupted) {
  const std::string path = write_many_kernels("time.sqlite", 20000);
  NsightReadBudget budget;
  budget.milliseconds = 0;
  const std::string e = error_of(path, budget);
  EXPECT_NE(e.find("took longer than 0 s"), std::string::npos) << e;
  std::filesystem::remove(path);
}

TEST(NsightBudget, AValueLongerThanTheBudgetIsRefused) {
  const std::string path = temp_path("long_value.sqlite");
  {
    NsightExportBuilder b(path);
    b.kernel(1000, 2000, 0, 7, 1, 100, "k");
    b.exec("INSERT INTO StringIds VALUES (7, CAST(zeroblob(3 << 20) AS TEXT))");
  }
  NsightReadBudget budget;
  budget.value_bytes = 1 << 20;
  const std::string e = error_of(path, budget);
  EXPECT_NE(e.find("longer than 1 MiB"), std::string::npos) << e;
  EXPECT_EQ(error_of(path), "") << "the default budget holds a 3 MiB value";
  std::filesystem::remove(path);
}

TEST(NsightBudget, TemporaryFilesPastTheBudgetAreRefused) {
  // 300,000 rows of the kernel query sort to about 20 MiB: past the cache, into temporary files.
  const std::string path = write_many_kernels("temp.sqlite", 300000);
  NsightReadBudget budget;
  budget.temp_bytes = 1 << 20;
  const std::string e = error_of(path, budget);
  EXPECT_NE(e.find("more than 1 MiB of temporary files"), std::string::npos) << e;
  std::int64_t kernels = 0;
  read_nsight_export(path, [&](GpuActivity&& b) { kernels += std::ssize(b.kernels); });
  EXPECT_EQ(kernels, 300000) << "the default budget sorts it";
  std::filesystem::remove(path);
}

// An export whose kernels ran on `devices` GPUs, a kernel each: `fathom analyze` reads it once
// for the whole and once a device.
std::string write_devices(const std::string& name, int devices) {
  const std::string path = temp_path(name);
  NsightExportBuilder b(path);
  for (int d = 0; d < devices; ++d) b.kernel(1000 + 10 * d, 1005 + 10 * d, d, 7, d + 1, 100, "k");
  return path;
}

std::string analysis_error_of(const std::string& path, const NsightReadBudget& budget) {
  try {
    (void)analyze_nsight_export(path, {}, budget);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The fuzzer's hang (CI, stop 31): a script gave the kernel table thousands of device numbers,
// and each device's pass had the whole budget again, so the analysis ran for minutes within it.
TEST(NsightBudget, EveryPassOfAnAnalysisSharesOneBudget) {
  const std::string path = write_devices("passes.sqlite", 4);
  NsightExportInfo whole;
  whole = read_nsight_export(path, [](GpuActivity&&) {});
  ASSERT_EQ(whole.devices.size(), 4u);
  ASSERT_GT(whole.spent.rows, 0);
  // One read's rows, and a few more: the whole export's pass fits, its four device passes do not.
  NsightReadBudget budget;
  budget.rows = whole.spent.rows + 2;
  const std::string e = analysis_error_of(path, budget);
  EXPECT_NE(e.find(fmt::format("more than {} rows", budget.rows)), std::string::npos) << e;
  // What the five passes step in all, as the analysis says: that budget holds them, one row
  // less does not.
  const ExportAnalysis unbounded = analyze_nsight_export(path, {});
  ASSERT_GT(unbounded.info.spent.rows, 4 * whole.spent.rows) << "each device's pass reads again";
  budget.rows = unbounded.info.spent.rows;
  EXPECT_EQ(analysis_error_of(path, budget), "") << "the rows of the five passes";
  budget.rows = unbounded.info.spent.rows - 1;
  EXPECT_NE(analysis_error_of(path, budget), "");
  std::filesystem::remove(path);
}

TEST(NsightBudget, ABudgetAlreadySpentIsRefusedBeforeTheRead) {
  const std::string path = write_devices("spent.sqlite", 1);
  NsightReadOptions o;
  o.budget.milliseconds = 1000;
  o.spent.milliseconds = 1000;
  try {
    read_nsight_export(
        path, [](GpuActivity&&) {}, o);
    ADD_FAILURE() << "a spent budget was read again";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("took longer than 1 s"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(NsightBudget, AnExportOfHundredsOfDevicesIsAnalyzedDeviceByDeviceUpToTheLimit) {
  const std::string path = write_devices("many_devices.sqlite", 300);
  const ExportAnalysis a = analyze_nsight_export(path, {});
  EXPECT_EQ(a.info.devices.size(), 300u);
  EXPECT_EQ(a.devices.size(), 128u) << "each device's pass reads the export again";
  bool said = false;
  for (const auto& u : a.report.environment.not_measured)
    said = said || u.why.find("the export names 300 devices") != std::string::npos;
  EXPECT_TRUE(said) << "the report says which devices have no figures of their own";
  ASSERT_FALSE(a.report.epochs.empty());
  ASSERT_TRUE(a.report.epochs.front().gpu.has_value());
  EXPECT_EQ(a.report.epochs.front().gpu->timeline.kernel_count, 300) << "all count in the whole";
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace fathom
