// The Nsight export reader under its budgets (NsightReadBudget): each input is a SQL script run
// against a small valid export (tests/support/nsight_export_builder.h), so the fuzzer writes what
// a hostile file can hold that byte mutation rarely reaches: views and recursive views in place of
// tables, virtual tables, generated columns, zeroblobs, huge or unsorted tables, odd types. The
// export is then analyzed as `fathom analyze` does with tight budgets: a result or a
// fathom::Error, never a hang (libFuzzer's -timeout), a crash or memory past -rss_limit_mb.
#include <fathom/error.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include "advise/export_analysis.h"
#include "nsight_export_builder.h"

namespace {

// The harness's own connection runs the script under a budget of its own: the script may be a
// recursive query, and that would be the harness hanging, not the reader.
int stop_script(void* deadline) {
  return std::chrono::steady_clock::now() >
         *static_cast<std::chrono::steady_clock::time_point*>(deadline);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = (std::filesystem::temp_directory_path() /
                                   ("fathom-fuzz-nsight-sql-" + std::to_string(::getpid()) +
                                    ".sqlite"))
                                      .string();
  {
    fathom::testing::NsightExportBuilder b(path);
    const std::int64_t t = fathom::testing::global_tid(100, 101);
    b.gpu(0, "NVIDIA H100", 9, 0);
    b.domain(5, "fathom");
    b.fathom_range(1000, 5000, t, "step 0", fathom::testing::FathomCategory::Step);
    b.fathom_range(1100, 3000, t, "forward", fathom::testing::FathomCategory::Phase);
    b.runtime(1200, 1210, t, 1, "cudaLaunchKernel_v7000");
    b.kernel(1300, 2000, 0, 7, 1, 100, "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN");
    b.runtime(1220, 1230, t, 2, "cudaMemcpyAsync_v3020");
    b.memcpy(2000, 2500, 0, 2, 100, 1 << 20, 7, 0, 6);
  }
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    sqlite3_progress_handler(db, 1000, stop_script, &deadline);
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 4 << 20);
    const std::string script(reinterpret_cast<const char*>(data), size);
    sqlite3_exec(db, script.c_str(), nullptr, nullptr, nullptr);  // errors are inputs too
  }
  sqlite3_close(db);
  fathom::NsightReadBudget budget;
  budget.rows = 1'000'000;
  budget.milliseconds = 2000;
  budget.value_bytes = 1 << 20;
  budget.temp_bytes = std::int64_t{16} << 20;
  try {
    (void)fathom::analyze_nsight_export(path, {}, budget);
  } catch (const fathom::Error&) {
    // The one way a reader may refuse its input.
  }
  return 0;
}
