#pragma once
// What fathom reads from an Nsight Systems SQLite export, and how the export's own numbering is
// decoded. The export numbers its enum values its own way (its memory kinds are not CUPTI's
// CUpti_ActivityMemoryKind), so every value goes through the export's ENUM_* tables, by name.
// Columns are looked up by name, never by position: Nsight versions add and drop columns.
#include <fathom/gpu_records.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "formats/nsight/sqlite_db.h"

namespace fathom::detail {

inline constexpr std::string_view kKernelTable = "CUPTI_ACTIVITY_KIND_KERNEL";
inline constexpr std::string_view kMemcpyTable = "CUPTI_ACTIVITY_KIND_MEMCPY";
inline constexpr std::string_view kMemsetTable = "CUPTI_ACTIVITY_KIND_MEMSET";
inline constexpr std::string_view kSyncTable = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
inline constexpr std::string_view kRuntimeTable = "CUPTI_ACTIVITY_KIND_RUNTIME";
inline constexpr std::string_view kNvtxTable = "NVTX_EVENTS";
inline constexpr std::string_view kStringTable = "StringIds";

// Nsight's serialized global ids hold the process in bits 24 and up (with the VM and hardware
// ids above it) and the thread below: a thread's process, comparable with a globalPid's.
constexpr std::uint64_t nsight_process(std::int64_t global_id) noexcept {
  return static_cast<std::uint64_t>(global_id) >> 24;
}

// One ENUM_* table: id -> name ("CUDA_MEMCPY_KIND_HTOD").
class EnumTable {
 public:
  // Throws fathom::Error naming the file, the table and what it decodes when it is missing.
  EnumTable(const SqliteDb& db, std::string_view table, std::string_view decodes);
  const std::string* name(std::int64_t id) const noexcept;
  // The id whose name is `name`; -1 when the table has none.
  std::int64_t id(std::string_view name) const noexcept;

 private:
  std::unordered_map<std::int64_t, std::string> names_;
};

MemcpyKind memcpy_kind_from_enum(std::string_view name) noexcept;  // ENUM_CUDA_MEMCPY_OPER
MemoryKind memory_kind_from_enum(std::string_view name) noexcept;  // ENUM_CUDA_MEM_KIND
SyncKind sync_kind_from_enum(std::string_view name) noexcept;      // ENUM_CUPTI_SYNC_TYPE

// A table's columns, for building a SELECT that names each one or NULL where it is absent.
class TableColumns {
 public:
  TableColumns(const SqliteDb& db, std::string_view table);
  bool has(std::string_view column) const { return have_.count(std::string(column)) > 0; }
  // The column, or NULL when this export's version lacks it.
  std::string optional(std::string_view column) const;
  // The column; throws fathom::Error naming the file, table and column when it is absent.
  std::string required(std::string_view column) const;

 private:
  const SqliteDb& db_;
  std::string table_;
  std::unordered_set<std::string> have_;
};

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": Nsight appends the API version to the name.
std::string_view runtime_call_name(std::string_view exported) noexcept;

}  // namespace fathom::detail
