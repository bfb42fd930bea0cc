#pragma once
// The trace files fathom reads: a fathom activity file (.jsonl, .jsonl.gz: what a session saves
// with Options::save_activity), a PyTorch profiler (Kineto) Chrome trace (.json, .json.gz) and an
// Nsight Systems SQLite export (`nsys export --type sqlite`), each read into the records the CUPTI
// collector produces. Implemented by the offline sources (src/formats); replay.h runs the
// analyses on what they read.
#include <fathom/gpu_records.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fathom {

inline constexpr int kActivityFileVersion = 1;

// Reads a whole activity file. Throws fathom::Error naming the file and the problem: not an
// activity file, another format version, a line that is not a record, or truncated (no end line).
GpuActivity load_activity(const std::string& path);
void save_activity(const GpuActivity& activity, const std::string& path);
// True when the file starts with an activity file header; false for anything else. Throws
// fathom::Error only when the file cannot be read at all.
bool is_activity_file(const std::string& path);

// A PyTorch profiler trace. Both the 2021 format (Kernel, Memcpy, Memset, Runtime, Operator;
// "external id") and the current one (kernel, gpu_memcpy, gpu_memset, cuda_runtime, cuda_driver,
// cuda_sync, cpu_op, user_annotation; "External id") are read. Throws fathom::Error naming the
// file and what is wrong: unreadable, truncated or corrupted (gzip or JSON), or not a Chrome trace.
GpuActivity read_kineto_trace(const std::string& path);
GpuActivity parse_kineto_trace(const std::string& text, const std::string& source_name);

// What reads of one analysis have spent of its budget. `fathom analyze` reads a multi-GPU export
// once for the whole and once a device: the budget covers all the reads together, or a file
// naming thousands of devices would be read thousands of times, each read within the budget.
struct NsightBudgetSpent {
  std::int64_t rows = 0;          // rows stepped
  std::int64_t milliseconds = 0;  // wall-clock time from the first read's open
};

// An Nsight Systems SQLite export: its CUPTI kernel, memcpy, memset, synchronization and runtime
// tables, and its NVTX ranges (fathom's own domain: epochs, steps, phases, ops; PyTorch's
// emit_nvtx op ranges; other domains are counted, not read). Enum values are decoded through the
// export's own ENUM_* tables. Kernels, copies and memsets carry the phase that was open on the
// thread that launched them (same correlation id, same process). The synchronization rows of
// event and stream queries (CUDA 13 writes one per cudaEventQuery) are not host waits and are
// not read. Rows that cannot be records (end before start, negative times, names that reference
// no string) are skipped and counted.
struct NsightExportInfo {
  std::string nsys_version;              // META_DATA_EXPORT's product version; "" when absent
  std::int64_t rows = 0;                 // rows turned into records
  std::int64_t skipped_rows = 0;         // rows that could not be (see skipped)
  std::vector<std::string> skipped;      // one line per reason: "3 kernel rows: end before start"
  std::int64_t fathom_ranges = 0;        // ranges in fathom's NVTX domain
  std::int64_t op_ranges = 0;            // op ranges (fathom's or emit_nvtx's)
  std::int64_t other_domain_ranges = 0;  // ranges of other domains (NCCL, ...): not read
  std::vector<std::int32_t> devices;     // with kernels, copies or memsets, ascending
  bool device_table = false;             // TARGET_INFO_GPU named the devices
  bool kernel_table = false;             // CUPTI_ACTIVITY_KIND_KERNEL is there (kernels measured)
  std::int64_t nvtx_ranges = 0;          // ranges read outside fathom's domain (user, emit_nvtx)
  // Those ranges by name, emit_nvtx's ", seq = N, op_id = N, sizes = ..." cut off: the
  // longest total first. Past kMaxRangeNames distinct names the rest count in one "(other)" row.
  struct RangeName {
    std::string name;
    std::int64_t count = 0;
    std::int64_t total_ns = 0;
  };
  static constexpr std::size_t kMaxRangeNames = 4096;
  std::vector<RangeName> range_names;
  NsightBudgetSpent spent;  // of the budget, this read and the earlier ones it was given
};

// What reading one export may spend, so that a hostile file (a recursive view, a zeroblob, a
// table sorted into the temp folder forever) is refused with a clear error instead of growing
// memory, disk or time without bound. The defaults hold exports of hours of training.
struct NsightReadBudget {
  std::int64_t rows = std::int64_t{1} << 32;              // rows stepped, all queries together
  std::int64_t milliseconds = std::int64_t{1800} * 1000;  // wall-clock time inside SQLite
  std::int32_t value_bytes = 16 << 20;  // the longest string or blob (SQLITE_LIMIT_LENGTH)
  std::int64_t temp_bytes = std::int64_t{4} << 30;  // SQLite's temporary files (sort spills)
};

// Which part of an export to read: everything, or one device's GPU records with the host records
// of the processes that used it.
struct NsightReadOptions {
  std::optional<std::int32_t> device;
  std::size_t batch_records = 65536;
  NsightReadBudget budget;
  NsightBudgetSpent spent;  // by earlier reads of the same analysis: this one gets the rest
};

// True when the file starts with SQLite's header. Throws fathom::Error when the file cannot be
// read, or is named as an export (.sqlite, .sqlite3, .db) but is not SQLite (empty, random).
bool is_sqlite_file(const std::string& path);
// Streams the export into sink in batches of time-ordered records: memory is bounded by the
// distinct names and the open ranges, not by the rows. Throws fathom::Error naming the file and
// the problem: not SQLite, not an Nsight export, a table or enum table missing, damaged or locked.
NsightExportInfo read_nsight_export(const std::string& path,
                                    const std::function<void(GpuActivity&&)>& sink,
                                    const NsightReadOptions& options = {});
GpuActivity load_nsight_export(const std::string& path, NsightExportInfo* info = nullptr);

// Any of the three, told apart by content (SQLite's header, an activity file header, or else a
// trace).
GpuActivity load_trace(const std::string& path);

}  // namespace fathom
