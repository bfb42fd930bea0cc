#pragma once
// Writes small Nsight Systems SQLite exports for tests, with libsqlite3 and the tables' real
// column names. The enum tables deliberately number their values unlike CUPTI (and unlike a real
// export), so a reader that assumed a numbering instead of decoding through them would fail.
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace fathom::testing {

// Nsight's serialized ids: the process in bits 24 and up, the thread below.
constexpr std::int64_t global_pid(std::int64_t pid) { return pid << 24; }
constexpr std::int64_t global_tid(std::int64_t pid, std::int64_t tid) { return (pid << 24) | tid; }

// fathom's NVTX categories (base/nvtx_vocabulary.h).
enum class FathomCategory : int { Epoch = 1, Step = 2, Phase = 3, Module = 4, Op = 5 };

class NsightExportBuilder {
 public:
  static constexpr std::int64_t kPushPop = 59, kStartEnd = 60, kDomainCreate = 75;
  // The export's own numbering, not CUPTI's.
  static constexpr std::int64_t kHtoD = 7, kDtoH = 3, kDtoD = 11, kPeer = 2;
  static constexpr std::int64_t kPageable = 4, kPinned = 0, kDevice = 6;

  explicit NsightExportBuilder(const std::string& path, bool with_enums = true) {
    std::filesystem::remove(path);
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("cannot create");
    exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN;");
    exec(R"(CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
      INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_VERSION', '2099.1.0-test');
      CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
        deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
        correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
        shortName INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
        gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
        blockZ INTEGER NOT NULL, someFutureColumn INTEGER);
      CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
        deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
        correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL,
        copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER);
      CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
        deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
        correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL);
      CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
        eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
        nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL);
      CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
        rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
        endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, int64Value INTEGER);
      CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, totalMemory INTEGER,
        computeMajor INTEGER, computeMinor INTEGER);
      CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER, pid INTEGER);)");
    if (with_enums) {
      exec(R"(CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER, name TEXT, label TEXT);
        INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (59, 'NvtxPushPopRange', ''),
          (60, 'NvtxStartEndRange', ''), (75, 'NvtxDomainCreate', ''), (34, 'NvtxMark', '');
        CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER, name TEXT, label TEXT);
        INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (7, 'CUDA_MEMCPY_KIND_HTOD', ''),
          (3, 'CUDA_MEMCPY_KIND_DTOH', ''), (11, 'CUDA_MEMCPY_KIND_DTOD', ''),
          (2, 'CUDA_MEMCPY_KIND_PTOP', ''), (0, 'CUDA_MEMCPY_KIND_UNKNOWN', '');
        CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER, name TEXT, label TEXT);
        INSERT INTO ENUM_CUDA_MEM_KIND VALUES (4, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', ''),
          (0, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', ''), (6, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', ''),
          (1, 'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN', '');)");
    }
  }
  ~NsightExportBuilder() { close(); }

  void close() {
    if (!db_) return;
    exec("COMMIT;");
    sqlite3_close(db_);
    db_ = nullptr;
  }

  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string m = err ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error(m + " in: " + sql);
    }
  }

  std::int64_t string(const std::string& s) {
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    const std::int64_t id = static_cast<std::int64_t>(ids_.size()) + 1000;
    ids_.emplace(s, id);
    exec("INSERT INTO StringIds VALUES (" + std::to_string(id) + ", " + quote(s) + ")");
    return id;
  }

  void gpu(std::int64_t cuda_id, const std::string& name, int major, int minor) {
    exec("INSERT INTO TARGET_INFO_GPU VALUES (" + std::to_string(cuda_id + 40) + ", " +
         quote(name) + ", 80000000000, " + std::to_string(major) + ", " + std::to_string(minor) +
         ")");
    exec("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (" + std::to_string(cuda_id + 40) + ", " +
         std::to_string(cuda_id) + ", 1)");
  }

  void domain(std::int64_t id, const std::string& name) {
    exec("INSERT INTO NVTX_EVENTS (start, eventType, text, domainId) VALUES (1, " +
         std::to_string(kDomainCreate) + ", " + quote(name) + ", " + std::to_string(id) + ")");
  }

  // A range: registered strings (textId) as fathom's phase names are, or inline text.
  void range(std::int64_t start, std::int64_t end, std::int64_t tid, const std::string& text,
             std::int64_t domain, int category, bool registered = false,
             std::int64_t type = kPushPop) {
    const std::string t = registered ? "NULL" : quote(text);
    const std::string id = registered ? std::to_string(string(text)) : "NULL";
    exec(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, category, text, globalTid, textId, "
        "domainId) VALUES (" +
        std::to_string(start) + ", " + std::to_string(end) + ", " + std::to_string(type) + ", " +
        std::to_string(category) + ", " + t + ", " + std::to_string(tid) + ", " + id + ", " +
        std::to_string(domain) + ")");
  }

  void fathom_range(std::int64_t start, std::int64_t end, std::int64_t tid, const std::string& text,
                    FathomCategory c, std::int64_t domain = 5) {
    range(start, end, tid, text, domain, static_cast<int>(c), c == FathomCategory::Phase);
  }

  // An op range as fathom's op callback writes it without shapes: the op's name registered, its
  // sequence number the int64 payload (none where seq < 0).
  void fathom_op(std::int64_t start, std::int64_t end, std::int64_t tid, const std::string& name,
                 std::int64_t seq, std::int64_t domain = 5) {
    exec(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, category, globalTid, textId, domainId, "
        "int64Value) VALUES (" +
        std::to_string(start) + ", " + std::to_string(end) + ", " + std::to_string(kPushPop) +
        ", " + std::to_string(static_cast<int>(FathomCategory::Op)) + ", " + std::to_string(tid) +
        ", " + std::to_string(string(name)) + ", " + std::to_string(domain) + ", " +
        (seq >= 0 ? std::to_string(seq) : std::string("NULL")) + ")");
  }

  void runtime(std::int64_t start, std::int64_t end, std::int64_t tid, std::int64_t corr,
               const std::string& name) {
    exec("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (" + std::to_string(start) + ", " +
         std::to_string(end) + ", 0, " + std::to_string(tid) + ", " + std::to_string(corr) + ", " +
         std::to_string(string(name)) + ", 0)");
  }

  void kernel(std::int64_t start, std::int64_t end, int device, int stream, std::int64_t corr,
              std::int64_t pid, const std::string& name) {
    const std::int64_t n = string(name);
    exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (" + std::to_string(start) + ", " +
         std::to_string(end) + ", " + std::to_string(device) + ", 1, " + std::to_string(stream) +
         ", " + std::to_string(corr) + ", " + std::to_string(global_pid(pid)) + ", " +
         std::to_string(n) + ", " + std::to_string(n) + ", 1, 1, 1, 128, 1, 1, NULL)");
  }

  void memcpy(std::int64_t start, std::int64_t end, int device, std::int64_t corr, std::int64_t pid,
              std::int64_t bytes, std::int64_t kind, std::int64_t src, std::int64_t dst) {
    exec("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (" + std::to_string(start) + ", " +
         std::to_string(end) + ", " + std::to_string(device) + ", 1, 7, " + std::to_string(corr) +
         ", " + std::to_string(global_pid(pid)) + ", " + std::to_string(bytes) + ", " +
         std::to_string(kind) + ", " + std::to_string(src) + ", " + std::to_string(dst) + ")");
  }

  void memset(std::int64_t start, std::int64_t end, int device, std::int64_t corr, std::int64_t pid,
              std::int64_t bytes) {
    exec("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (" + std::to_string(start) + ", " +
         std::to_string(end) + ", " + std::to_string(device) + ", 1, 7, " + std::to_string(corr) +
         ", " + std::to_string(global_pid(pid)) + ", 0, " + std::to_string(bytes) + ")");
  }

  // A host synchronization (its table and enum made at the first one). Real exports write
  // deviceId 0 for every process's, whichever device it waited for.
  static constexpr int kStreamSync = 3, kStreamWaitEvent = 2, kEventSync = 1;
  void sync(std::int64_t start, std::int64_t end, std::int64_t pid, std::int64_t corr,
            int type = kStreamSync, int device = 0) {
    if (!sync_table_) {
      exec(R"(CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL,
          end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
          streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
          syncType INTEGER NOT NULL, eventId INTEGER NOT NULL);
        CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER, name TEXT, label TEXT);
        INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES
          (0, 'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN', ''),
          (1, 'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE', ''),
          (2, 'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT', ''),
          (3, 'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE', ''),
          (4, 'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE', '');)");
      sync_table_ = true;
    }
    exec("INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (" + std::to_string(start) + ", " +
         std::to_string(end) + ", " + std::to_string(device) + ", 1, 7, " + std::to_string(corr) +
         ", " + std::to_string(global_pid(pid)) + ", " + std::to_string(type) + ", 0)");
  }

 private:
  static std::string quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
  }

  sqlite3* db_ = nullptr;
  std::unordered_map<std::string, std::int64_t> ids_;
  bool sync_table_ = false;
};

}  // namespace fathom::testing
