// `fathom analyze` on Nsight Systems exports: rows per second and peak resident memory, on the
// real exports in tests/data/traces and on a synthetic export of N kernel rows (default 10 M; each
// kernel with its launch, steps of 100 kernels in fathom's ranges) written here with libsqlite3.
//   nsight_export_bench [--rows N] [--keep PATH]
// Each analysis runs in a child process of its own, so each peak resident size is that analysis'
// alone (the writer's page cache and the other runs do not count).
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "advise/export_analysis.h"

namespace {

void check(int rc, sqlite3* db) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE) {
    std::fprintf(stderr, "sqlite: %s\n", sqlite3_errmsg(db));
    std::exit(1);
  }
}

// The tables with the columns fathom reads, in an export's shape.
void write_export(const std::string& path, long rows) {
  std::filesystem::remove(path);
  sqlite3* db = nullptr;
  check(sqlite3_open(path.c_str(), &db), db);
  const char* schema = R"(PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN;
    CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER, name TEXT, label TEXT);
    INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (59, 'NvtxPushPopRange', ''), (75, 'NvtxDomainCreate', '');
    CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
      deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
      globalPid INTEGER, demangledName INTEGER NOT NULL, gridX INTEGER, gridY INTEGER,
      gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER);
    CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
      globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL);
    CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
      category INTEGER, text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER);
    INSERT INTO NVTX_EVENTS (start, eventType, text, domainId) VALUES (0, 75, 'fathom', 5);)";
  check(sqlite3_exec(db, schema, nullptr, nullptr, nullptr), db);
  const int kNames = 64;
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO StringIds VALUES (?, ?)", -1, &s, nullptr);
  for (int i = 0; i < kNames; ++i) {
    const std::string n =
        i % 4 == 0
            ? "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN_" + std::to_string(i)
            : "void at::native::vectorized_elementwise_kernel<" + std::to_string(i) + ">(int)";
    sqlite3_bind_int(s, 1, i);
    sqlite3_bind_text(s, 2, n.c_str(), -1, SQLITE_TRANSIENT);
    check(sqlite3_step(s), db);
    sqlite3_reset(s);
  }
  sqlite3_bind_int(s, 1, 100);
  sqlite3_bind_text(s, 2, "cudaLaunchKernel_v7000", -1, SQLITE_STATIC);
  check(sqlite3_step(s), db);
  sqlite3_finalize(s);
  const std::int64_t pid = 7, tid = (pid << 24) | 8;
  sqlite3_stmt *k = nullptr, *r = nullptr, *n = nullptr;
  sqlite3_prepare_v2(db,
                     "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,0,?,?,?,?,1,1,1,128,1,1)",
                     -1, &k, nullptr);
  sqlite3_prepare_v2(db, "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,100)", -1, &r,
                     nullptr);
  sqlite3_prepare_v2(db,
                     "INSERT INTO NVTX_EVENTS (start, end, eventType, category, text, "
                     "globalTid, domainId) VALUES (?,?,59,?,?,?,5)",
                     -1, &n, nullptr);
  auto range = [&](std::int64_t a, std::int64_t b, int category, const std::string& text) {
    sqlite3_bind_int64(n, 1, a);
    sqlite3_bind_int64(n, 2, b);
    sqlite3_bind_int(n, 3, category);
    sqlite3_bind_text(n, 4, text.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(n, 5, tid);
    check(sqlite3_step(n), db);
    sqlite3_reset(n);
  };
  // A step every 100 kernels: 40 us of launches (forward, then backward), kernels of 3 us.
  for (long i = 0; i < rows; ++i) {
    const std::int64_t step = i / 100, in = i % 100, base = step * 400'000;
    if (in == 0) {
      range(base, base + 400'000, 2, "step " + std::to_string(step));
      range(base + 1'000, base + 200'000, 3, "forward");
      range(base + 200'000, base + 390'000, 3, "backward");
    }
    const std::int64_t launch = base + 1'500 + in * 3'800, corr = i + 1;
    sqlite3_bind_int64(r, 1, launch);
    sqlite3_bind_int64(r, 2, launch + 2'000);
    sqlite3_bind_int64(r, 3, tid);
    sqlite3_bind_int64(r, 4, corr);
    check(sqlite3_step(r), db);
    sqlite3_reset(r);
    sqlite3_bind_int64(k, 1, launch + 5'000);
    sqlite3_bind_int64(k, 2, launch + 8'000);
    sqlite3_bind_int(k, 3, 7 + static_cast<int>(i % 2));
    sqlite3_bind_int64(k, 4, corr);
    sqlite3_bind_int64(k, 5, pid << 24);
    sqlite3_bind_int(k, 6, static_cast<int>(i % kNames));
    check(sqlite3_step(k), db);
    sqlite3_reset(k);
  }
  sqlite3_finalize(k);
  sqlite3_finalize(r);
  sqlite3_finalize(n);
  check(sqlite3_exec(db, "COMMIT;", nullptr, nullptr, nullptr), db);
  sqlite3_close(db);
}

// Analyses the export in a child process; prints one row.
void measure(const std::string& label, const std::string& path) {
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    rusage before{};
    getrusage(RUSAGE_SELF, &before);
    const auto t0 = std::chrono::steady_clock::now();
    const fathom::ExportAnalysis a = fathom::analyze_nsight_export(path, {});
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rusage after{};
    getrusage(RUSAGE_SELF, &after);
    const auto cpu = [](const rusage& u) {
      return u.ru_utime.tv_sec + u.ru_stime.tv_sec +
             (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
    };
    const double cpu_s = cpu(after) - cpu(before);
    const double rows = static_cast<double>(a.info.rows);
    const auto& g = *a.report.epochs.at(0).gpu;
    std::printf("%-34s %12.0f %9.2f %9.2f %12.2f %10.1f   %zu step rows, %lld kernels\n",
                label.c_str(), rows, wall, cpu_s, rows / cpu_s / 1e6, after.ru_maxrss / 1024.0,
                g.steps.size(), static_cast<long long>(g.timeline.kernel_count));
    std::fflush(stdout);
    std::_Exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::printf("%s: failed\n", label.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  long rows = 10'000'000;
  std::string keep;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rows") && i + 1 < argc) rows = std::atol(argv[++i]);
    if (!std::strcmp(argv[i], "--keep") && i + 1 < argc) keep = argv[++i];
  }
  std::printf("%-34s %12s %9s %9s %12s %10s\n", "export", "rows read", "wall s", "CPU s",
              "M rows/CPU s", "peak MiB");
  for (const char* f : {"nsys_mfu_2gpu_before.sqlite", "nsys_mfu_2gpu_after.sqlite"})
    measure(f, std::string(FATHOM_TEST_TRACES) + "/" + f);
  for (long n : {rows / 10, rows}) {
    const std::string path = keep.empty() ? (std::filesystem::temp_directory_path() /
                                             ("fathom_bench_" + std::to_string(n) + ".sqlite"))
                                                .string()
                                          : keep + "." + std::to_string(n);
    const auto t0 = std::chrono::steady_clock::now();
    write_export(path, n);
    std::printf("  (wrote %ld kernel rows, %.0f MiB, in %.1f s)\n", n,
                std::filesystem::file_size(path) / 1048576.0,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    measure("synthetic, " + std::to_string(n) + " kernels", path);
    if (keep.empty()) std::filesystem::remove(path);
  }
}
