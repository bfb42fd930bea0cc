// The Nsight Systems SQLite export, streamed into records (<fathom/replay.h>). One query per
// table, each ordered by start, merged in time: host records reach the aggregator before the GPU
// work they launched, and memory stays one row per table plus the open ranges.
#include <fathom/error.h>
#include <fathom/trace_files.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/annotation_roles.h"
#include "base/file_system.h"
#include "base/kernel_name.h"
#include "base/nvtx_vocabulary.h"
#include "formats/activity_batches.h"
#include "formats/nsight/nsight_schema.h"
#include "formats/nsight/op_range_text.h"
#include "formats/nsight/sqlite_db.h"

namespace fathom {
namespace {

using detail::EnumTable;
using detail::SqliteDb;
using detail::SqliteQuery;
using detail::TableColumns;

enum class Source : std::uint8_t { Nvtx, Runtime, Sync, Kernel, Memcpy, Memset };
constexpr std::size_t kSources = 6;
constexpr std::array<std::string_view, kSources> kSourceNoun{
    "NVTX range", "runtime call", "synchronization", "kernel", "memcpy", "memset"};

enum class Skip : std::uint8_t { EndBeforeStart, TimeOutOfRange, NoString, NeverEnded, BadValue };
constexpr std::size_t kSkips = 5;
constexpr std::int64_t kMaxDevices = 1 << 16;  // CUDA device numbers are small and never negative
constexpr std::array<std::string_view, kSkips> kSkipWhy{
    "end before start", "timestamp out of range (negative, or past 2^62 ns)",
    "name references no string", "never ended", "value out of range"};

// A range that may hold later launches on its thread.
struct OpenPhase {
  std::int64_t start = 0;
  std::int64_t end = 0;
  Phase phase = Phase::Data;
  bool fathom = false;  // fathom's own ranges decide over names read from other ranges
};

struct Cursor {
  Source source;
  std::unique_ptr<SqliteQuery> query;
  bool live = false;
  std::int64_t start = 0;
  void advance() {
    live = query->step();
    if (live) start = query->integer(0);
  }
};

class Reader {
 public:
  Reader(const std::string& path, const std::function<void(GpuActivity&&)>& sink,
         const NsightReadOptions& options)
      : db_(path, options.budget, options.spent), sink_(sink), options_(options) {}

  NsightExportInfo run() {
    check_is_export();
    read_metadata();
    load_strings();
    find_devices();
    if (options_.device) find_processes_of(*options_.device);
    read_devices();
    open_cursors();
    merge();
    flush();
    finish_info();
    finish_range_names();
    info_.spent = db_.spent();
    return std::move(info_);
  }

 private:
  // --- the export's frame ---

  void check_is_export() {
    bool any = db_.has_table(detail::kNvtxTable);
    for (std::string_view t : {detail::kKernelTable, detail::kMemcpyTable, detail::kMemsetTable,
                               detail::kRuntimeTable, detail::kSyncTable}) {
      const bool here = db_.has_table(t);
      any = any || here;
      has_[t] = here;
    }
    has_[detail::kNvtxTable] = db_.has_table(detail::kNvtxTable);
    info_.kernel_table = has_[detail::kKernelTable];
    if (!db_.has_table(detail::kStringTable) || !any)
      throw Error(fmt::format(
          "{} is a SQLite database but not an Nsight Systems export (it has no StringIds table, "
          "or no CUPTI_ACTIVITY_KIND_* and NVTX_EVENTS table): give the file `nsys export --type "
          "sqlite REPORT.nsys-rep` writes",
          db_.path()));
  }

  bool has(std::string_view table) const {
    auto it = has_.find(table);
    return it != has_.end() && it->second;
  }

  void read_metadata() {
    if (!db_.has_table("META_DATA_EXPORT")) return;
    SqliteQuery q(db_, "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_VERSION'");
    if (q.step()) info_.nsys_version = std::string(q.text(0));
  }

  void load_strings() {
    SqliteQuery q(db_, "SELECT id, value FROM StringIds");
    while (q.step()) strings_.emplace(q.integer(0), std::string(q.text(1)));
  }

  const std::string* string(std::int64_t id) const {
    auto it = strings_.find(id);
    return it == strings_.end() ? nullptr : &it->second;
  }

  void find_devices() {
    std::vector<std::string> parts;
    for (std::string_view t : {detail::kKernelTable, detail::kMemcpyTable, detail::kMemsetTable})
      if (has(t))  // a row on no real device (deviceId -3) is skipped and counted when read
        parts.push_back(
            fmt::format("SELECT DISTINCT deviceId FROM {} WHERE deviceId >= 0 AND deviceId < {}", t,
                        kMaxDevices));
    if (parts.empty()) return;
    SqliteQuery q(db_, fmt::format("SELECT DISTINCT deviceId FROM ({}) ORDER BY deviceId",
                                   fmt::join(parts, " UNION ")));
    while (q.step()) info_.devices.push_back(static_cast<std::int32_t>(q.integer(0)));
  }

  // The processes whose GPU work ran on the device: their host records go with it.
  void find_processes_of(std::int32_t device) {
    std::vector<std::string> parts;
    for (std::string_view t : {detail::kKernelTable, detail::kMemcpyTable, detail::kMemsetTable})
      if (has(t) && TableColumns(db_, t).has("globalPid"))
        parts.push_back(fmt::format(
            "SELECT DISTINCT (globalPid >> 24) AS p FROM {} WHERE deviceId = {}", t, device));
    if (parts.empty()) return;
    SqliteQuery q(db_, fmt::format("{}", fmt::join(parts, " UNION ")));
    while (q.step()) processes_.push_back(q.integer(0));
  }

  std::string host_filter(std::string_view thread_column) const {
    if (!options_.device) return "";
    if (processes_.empty()) return " WHERE 0";
    return fmt::format(" WHERE ({} >> 24) IN ({})", thread_column, fmt::join(processes_, ","));
  }

  std::string device_filter() const {
    return options_.device ? fmt::format(" WHERE deviceId = {}", *options_.device) : "";
  }

  void read_devices() {
    if (!db_.has_table("TARGET_INFO_GPU")) return;
    const TableColumns c(db_, "TARGET_INFO_GPU");
    if (!c.has("id")) return;
    // CUDA's device numbers (the activity tables' deviceId) map to the GPU rows through
    // TARGET_INFO_CUDA_DEVICE where the export has it; older exports number both alike.
    std::string sql = fmt::format("SELECT id, {}, {}, {}, {} FROM TARGET_INFO_GPU",
                                  c.optional("name"), c.optional("computeMajor"),
                                  c.optional("computeMinor"), c.optional("totalMemory"));
    if (db_.has_table("TARGET_INFO_CUDA_DEVICE")) {
      const TableColumns d(db_, "TARGET_INFO_CUDA_DEVICE");
      if (d.has("gpuId") && d.has("cudaId"))
        sql = fmt::format(
            "SELECT DISTINCT d.cudaId, {}, {}, {}, {} FROM TARGET_INFO_GPU g JOIN "
            "TARGET_INFO_CUDA_DEVICE d ON g.id = d.gpuId",
            c.has("name") ? "g.name" : "NULL", c.has("computeMajor") ? "g.computeMajor" : "NULL",
            c.has("computeMinor") ? "g.computeMinor" : "NULL",
            c.has("totalMemory") ? "g.totalMemory" : "NULL");
    }
    SqliteQuery q(db_, sql);
    std::unordered_set<std::int32_t> device_ids;
    while (q.step()) {
      DeviceProperties p;
      p.id = static_cast<std::int32_t>(q.integer(0));
      if (options_.device && p.id != *options_.device) continue;
      // A set, not a scan of the list: a hostile table may name tens of thousands of GPUs.
      if (!device_ids.insert(p.id).second) continue;
      p.name = std::string(q.text(1));
      p.compute_major = static_cast<int>(q.integer(2));
      p.compute_minor = static_cast<int>(q.integer(3));
      p.total_memory_bytes = q.integer(4);
      batch_.devices.push_back(std::move(p));
      info_.device_table = true;
    }
  }

  // --- the queries ---

  void open_cursors() {
    if (has(detail::kNvtxTable)) open_nvtx();
    if (has(detail::kRuntimeTable)) {
      const TableColumns c(db_, detail::kRuntimeTable);
      add_cursor(
          Source::Runtime,
          fmt::format("SELECT start, {}, {}, {}, {} FROM {}{} ORDER BY start", c.required("end"),
                      c.required("globalTid"), c.required("correlationId"), c.required("nameId"),
                      detail::kRuntimeTable, host_filter("globalTid")));
    }
    if (has(detail::kSyncTable)) {
      const TableColumns c(db_, detail::kSyncTable);
      sync_types_ = std::make_unique<EnumTable>(db_, "ENUM_CUPTI_SYNC_TYPE",
                                                "the synchronizations' syncType");
      // A synchronization is the host's: it goes with the process that waited. Its deviceId is
      // not the device waited for (exports write 0 for every rank's), so it decides only where
      // the export has no globalPid.
      add_cursor(Source::Sync,
                 fmt::format("SELECT start, {}, {}, {}, {}, {} FROM {}{} ORDER BY "
                             "start",
                             c.required("end"), c.required("streamId"), c.optional("correlationId"),
                             c.optional("globalPid"), c.required("syncType"), detail::kSyncTable,
                             c.has("globalPid") ? host_filter("globalPid") : device_filter()));
    }
    if (has(detail::kKernelTable)) {
      const TableColumns c(db_, detail::kKernelTable);
      // The mangled name, as CUPTI gave it to Nsight and gives it to a live session: both then
      // go through the aggregator's one normalizer (kernel_name.h) and show the same names.
      const std::string shown = c.has("demangledName") ? "demangledName" : c.required("shortName");
      const std::string name =
          c.has("mangledName") ? "COALESCE(mangledName, " + shown + ")" : shown;
      add_cursor(Source::Kernel,
                 fmt::format("SELECT start, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {} FROM "
                             "{}{} ORDER BY start",
                             c.required("end"), c.required("deviceId"), c.required("streamId"),
                             c.optional("correlationId"), c.optional("globalPid"), name,
                             c.optional("gridX"), c.optional("gridY"), c.optional("gridZ"),
                             c.optional("blockX"), c.optional("blockY"), c.optional("blockZ"),
                             detail::kKernelTable, device_filter()));
    }
    if (has(detail::kMemcpyTable)) {
      const TableColumns c(db_, detail::kMemcpyTable);
      copy_kinds_ =
          std::make_unique<EnumTable>(db_, "ENUM_CUDA_MEMCPY_OPER", "the copies' copyKind");
      memory_kinds_ =
          std::make_unique<EnumTable>(db_, "ENUM_CUDA_MEM_KIND", "the copies' srcKind and dstKind");
      add_cursor(Source::Memcpy,
                 fmt::format("SELECT start, {}, {}, {}, {}, {}, {}, {}, {}, {} FROM {}{} ORDER "
                             "BY start",
                             c.required("end"), c.required("deviceId"), c.required("streamId"),
                             c.optional("correlationId"), c.optional("globalPid"),
                             c.required("bytes"), c.required("copyKind"), c.optional("srcKind"),
                             c.optional("dstKind"), detail::kMemcpyTable, device_filter()));
    }
    if (has(detail::kMemsetTable)) {
      const TableColumns c(db_, detail::kMemsetTable);
      add_cursor(Source::Memset,
                 fmt::format("SELECT start, {}, {}, {}, {}, {}, {} FROM {}{} ORDER BY start",
                             c.required("end"), c.required("deviceId"), c.required("streamId"),
                             c.optional("correlationId"), c.optional("globalPid"),
                             c.required("bytes"), detail::kMemsetTable, device_filter()));
    }
  }

  void open_nvtx() {
    const EnumTable types(db_, "ENUM_NSYS_EVENT_TYPE", "the NVTX events' eventType");
    std::vector<std::int64_t> ranges;
    for (std::string_view n :
         {"NvtxPushPopRange", "NvtxStartEndRange", "NvtxtPushPopRange", "NvtxtStartEndRange"})
      if (const std::int64_t id = types.id(n); id >= 0) ranges.push_back(id);
    const TableColumns c(db_, detail::kNvtxTable);
    // fathom's domain, by the name it was created with.
    if (const std::int64_t create = types.id("NvtxDomainCreate");
        create >= 0 && c.has("domainId") && c.has("text")) {
      SqliteQuery q(db_, fmt::format("SELECT DISTINCT domainId FROM {} WHERE eventType = {} AND "
                                     "text = '{}'",
                                     detail::kNvtxTable, create, nvtx::kDomainName));
      while (q.step()) fathom_domains_.push_back(q.integer(0));
    }
    if (ranges.empty()) return;
    std::string where = fmt::format(" WHERE eventType IN ({})", fmt::join(ranges, ","));
    if (options_.device) {
      const std::string h = host_filter("globalTid");
      where += h == " WHERE 0" ? std::string(" AND 0") : " AND" + h.substr(6);
    }
    add_cursor(Source::Nvtx,
               fmt::format("SELECT start, {}, {}, {}, {}, {}, {}, {} FROM {}{} ORDER BY start",
                           c.optional("end"), c.optional("text"), c.optional("textId"),
                           c.optional("globalTid"), c.optional("domainId"), c.optional("category"),
                           c.optional("int64Value"), detail::kNvtxTable, where));
  }

  void add_cursor(Source s, const std::string& sql) {
    Cursor c{s, std::make_unique<SqliteQuery>(db_, sql)};
    c.advance();
    cursors_.push_back(std::move(c));
  }

  // --- the merge ---

  void merge() {
    while (true) {
      Cursor* next = nullptr;
      for (Cursor& c : cursors_)  // ties: the order opened (ranges and launches first)
        if (c.live && (!next || c.start < next->start)) next = &c;
      if (!next) return;
      const SqliteQuery& q = *next->query;
      switch (next->source) {
        case Source::Nvtx:
          take_range(q);
          break;
        case Source::Runtime:
          take_runtime(q);
          break;
        case Source::Sync:
          take_sync(q);
          break;
        case Source::Kernel:
          take_kernel(q);
          break;
        case Source::Memcpy:
          take_memcpy(q);
          break;
        case Source::Memset:
          take_memset(q);
          break;
      }
      next->advance();
      if (held_ >= options_.batch_records) flush();
    }
  }

  void flush() {
    if (held_ == 0 && batch_.devices.empty()) return;
    sink_(std::move(batch_));
    batch_ = GpuActivity{};
    held_ = 0;
  }

  // Times past 2^62 ns (146 years) are no clock's: rejected here, the aggregation's differences
  // and sums of times cannot overflow.
  bool times_ok(Source s, std::int64_t start, std::int64_t end) {
    constexpr std::int64_t kMaxTime = std::int64_t{1} << 62;
    if (start < 0 || end < 0 || start > kMaxTime || end > kMaxTime)
      return skip(s, Skip::TimeOutOfRange);
    if (end < start) return skip(s, Skip::EndBeforeStart);
    return true;
  }

  bool skip(Source s, Skip why) {
    ++skipped_[static_cast<std::size_t>(s)][static_cast<std::size_t>(why)];
    return false;
  }

  void taken() {
    ++held_;
    ++info_.rows;
  }

  // Correlation ids count per process: the process makes them unique in the export.
  std::uint64_t correlation(std::int64_t process, std::optional<std::int64_t> id) {
    if (!id || *id <= 0) return 0;
    auto [it, added] = process_slots_.try_emplace(process, process_slots_.size() + 1);
    return (static_cast<std::uint64_t>(it->second) << 32) |
           (static_cast<std::uint64_t>(*id) & 0xffffffffu);
  }

  static std::int32_t small(std::int64_t v) noexcept {
    return static_cast<std::int32_t>(std::clamp<std::int64_t>(v, -1, INT32_MAX));
  }

  bool fathom_domain(std::int64_t domain) const noexcept {
    return std::find(fathom_domains_.begin(), fathom_domains_.end(), domain) !=
           fathom_domains_.end();
  }

  void take_range(const SqliteQuery& q) {
    const std::int64_t start = q.integer(0);
    const auto end = q.optional_integer(1);
    if (!end) return void(skip(Source::Nvtx, Skip::NeverEnded));
    if (!times_ok(Source::Nvtx, start, *end)) return;
    std::string_view text = q.text(2);
    if (q.null(2)) {
      const std::string* s = q.null(3) ? nullptr : string(q.integer(3));
      if (!s) return void(skip(Source::Nvtx, Skip::NoString));
      text = *s;
    }
    const std::uint64_t thread = static_cast<std::uint64_t>(q.integer(4));
    const std::int64_t domain = q.integer(5);
    if (fathom_domain(domain)) {
      ++info_.fathom_ranges;
      const std::optional<std::int64_t> payload = q.optional_integer(7);
      take_fathom_range(static_cast<nvtx::Kind>(q.integer(6)), text, payload, thread, start, *end);
    } else if (domain == 0) {
      count_range_name(text, *end - start);
      take_default_range(text, thread, start, *end);
    } else {
      ++info_.other_domain_ranges;
      count_range_name(text, *end - start);
    }
  }

  void take_fathom_range(nvtx::Kind kind, std::string_view text,
                         std::optional<std::int64_t> payload, std::uint64_t thread,
                         std::int64_t start, std::int64_t end) {
    switch (kind) {
      case nvtx::Kind::Step:
        add_annotation(text, thread, start, end, AnnotationRole::Step, Phase::Data, true);
        break;
      case nvtx::Kind::Phase:
        if (auto p = phase_from_name(text))
          add_annotation(text, thread, start, end, AnnotationRole::Phase, *p, true);
        break;
      case nvtx::Kind::Op:
        add_op(fathom_op(text, payload), thread, start, end);
        break;
      default:  // epochs, modules and findings: the GPU analyses do not read them
        break;
    }
  }

  // fathom's op ranges: the category says it is an op. Without shapes the text is the op's name
  // alone (a registered string) and its sequence number the range's int64 payload; with shapes
  // both are in the text.
  static detail::OpRangeText fathom_op(std::string_view text, std::optional<std::int64_t> payload) {
    detail::OpRangeText op;
    if (auto parsed = detail::parse_op_range_text(text))
      op = std::move(*parsed);
    else
      op.name = std::string(text);
    if (op.sequence_nr < 0 && payload && *payload >= 0) op.sequence_nr = *payload;
    return op;
  }

  // PyTorch's emit_nvtx ranges (ops; autograd nodes are the backward pass) and user ranges that
  // name a phase or a step the way a PyTorch profiler trace does.
  void take_default_range(std::string_view text, std::uint64_t thread, std::int64_t start,
                          std::int64_t end) {
    const std::string_view base = detail::op_range_base_name(text);
    const AnnotationMeaning m = annotation_meaning(base);
    if (m.role != AnnotationRole::None)
      add_annotation(m.role == AnnotationRole::Step ? text : base, thread, start, end, m.role,
                     m.phase, false);
    if (auto op = detail::parse_op_range_text(text)) add_op(std::move(*op), thread, start, end);
  }

  // The ranges' name table: emit_nvtx's sequence numbers and shapes are cut, so one op is one
  // row; the distinct names are bounded (the rest share one row).
  void count_range_name(std::string_view text, std::int64_t ns) {
    ++info_.nvtx_ranges;
    std::string_view name = detail::op_range_base_name(text);
    auto it = range_names_.find(name);
    if (it == range_names_.end()) {
      if (range_names_.size() >= NsightExportInfo::kMaxRangeNames) name = "(other)";
      it = range_names_.try_emplace(std::string(name)).first;
    }
    ++it->second.count;
    it->second.total_ns += ns;
  }

  void finish_range_names() {
    for (auto& [name, r] : range_names_) {
      r.name = name;
      info_.range_names.push_back(std::move(r));
    }
    std::sort(info_.range_names.begin(), info_.range_names.end(),
              [](const NsightExportInfo::RangeName& a, const NsightExportInfo::RangeName& b) {
                return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
              });
  }

  void add_annotation(std::string_view name, std::uint64_t thread, std::int64_t start,
                      std::int64_t end, AnnotationRole role, Phase phase, bool fathom) {
    batch_.annotations.push_back(
        AnnotationRecord{std::string(name), thread, start, end, role, phase});
    taken();
    if (role == AnnotationRole::Phase) {
      auto& open = open_phases_[thread];
      std::erase_if(open, [&](const OpenPhase& o) { return o.end <= start; });
      open.push_back(OpenPhase{start, end, phase, fathom});
    }
  }

  void add_op(detail::OpRangeText&& op, std::uint64_t thread, std::int64_t start,
              std::int64_t end) {
    ++info_.op_ranges;
    OpRecord r;
    r.name = std::move(op.name);
    r.sequence_nr = op.sequence_nr;
    r.thread = thread;
    r.start_ns = start;
    r.end_ns = end;
    r.input_shapes = std::move(op.input_shapes);
    batch_.ops.push_back(std::move(r));
    taken();
  }

  static bool is_query_call(std::string_view name) noexcept {
    return name == "cudaEventQuery" || name == "cudaStreamQuery" || name == "cuEventQuery" ||
           name == "cuStreamQuery";
  }

  // The innermost phase open on the thread at t: fathom's ranges first.
  std::optional<Phase> phase_at(std::uint64_t thread, std::int64_t t) {
    auto it = open_phases_.find(thread);
    if (it == open_phases_.end()) return std::nullopt;
    auto& open = it->second;
    std::erase_if(open, [&](const OpenPhase& o) { return o.end <= t; });
    const OpenPhase* best = nullptr;
    for (const OpenPhase& o : open) {
      if (o.start > t) continue;
      if (!best || (o.fathom && !best->fathom) ||
          (o.fathom == best->fathom && o.start >= best->start))
        best = &o;
    }
    if (open.empty()) open_phases_.erase(it);
    return best ? std::optional<Phase>(best->phase) : std::nullopt;
  }

  void take_runtime(const SqliteQuery& q) {
    const std::int64_t start = q.integer(0), end = q.integer(1);
    if (!times_ok(Source::Runtime, start, end)) return;
    const std::string* name = string(q.integer(4));
    if (!name) return void(skip(Source::Runtime, Skip::NoString));
    RuntimeCallRecord r;
    r.name = std::string(detail::runtime_call_name(*name));
    r.thread = static_cast<std::uint64_t>(q.integer(2));
    r.start_ns = start;
    r.end_ns = end;
    r.correlation_id = correlation(static_cast<std::int64_t>(detail::nsight_process(q.integer(2))),
                                   q.optional_integer(3));
    r.phase = phase_at(r.thread, start);
    // Whether a copy was asked for asynchronously is the API's name; the copy's row comes later.
    if (r.correlation_id && r.name.find("emcpy") != std::string::npos) {
      if (copy_calls_.size() > (std::size_t{1} << 16)) copy_calls_.clear();
      copy_calls_[r.correlation_id] = r.name.find("Async") != std::string::npos;
    }
    // CUDA 13's CUPTI writes a synchronization row for every event or stream query too (an
    // EVENT_SYNCHRONIZE row per cudaEventQuery), but a query returns at once: the host never
    // waited in it. Its row comes later, after the call's.
    if (r.correlation_id && is_query_call(r.name)) {
      if (query_calls_.size() > (std::size_t{1} << 16)) query_calls_.clear();
      query_calls_.insert(r.correlation_id);
    }
    batch_.runtime_calls.push_back(std::move(r));
    taken();
  }

  void take_sync(const SqliteQuery& q) {
    const std::int64_t start = q.integer(0), end = q.integer(1);
    if (!times_ok(Source::Sync, start, end)) return;
    SyncRecord r;
    r.stream = small(q.integer(2));
    r.start_ns = start;
    r.end_ns = end;
    r.correlation_id = correlation(static_cast<std::int64_t>(detail::nsight_process(q.integer(4))),
                                   q.optional_integer(3));
    if (query_calls_.erase(r.correlation_id)) return;  // a poll, not a wait (take_runtime)
    const std::string* kind = sync_types_->name(q.integer(5));
    r.kind = kind ? detail::sync_kind_from_enum(*kind) : SyncKind::Unknown;
    batch_.syncs.push_back(r);
    taken();
  }

  bool device_ok(Source s, std::int64_t device) {
    return (device >= 0 && device < kMaxDevices) || skip(s, Skip::BadValue);
  }

  // The columns every GPU table's query starts with (start, end, deviceId, streamId,
  // correlationId, globalPid) into the span a kernel, a copy and a memset share (gpu_records.h);
  // false (counted) when the row cannot be a record.
  bool gpu_row(Source s, const SqliteQuery& q, GpuSpan& r) {
    const std::int64_t start = q.integer(0), end = q.integer(1);
    if (!times_ok(s, start, end) || !device_ok(s, q.integer(2))) return false;
    r.device = small(q.integer(2));
    r.stream = small(q.integer(3));
    r.start_ns = start;
    r.end_ns = end;
    r.correlation_id = correlation(static_cast<std::int64_t>(detail::nsight_process(q.integer(5))),
                                   q.optional_integer(4));
    return true;
  }

  void take_kernel(const SqliteQuery& q) {
    KernelRecord k;
    if (!gpu_row(Source::Kernel, q, k)) return;
    const std::string* name = string(q.integer(6));
    if (!name) return void(skip(Source::Kernel, Skip::NoString));
    k.name = kernel_name_prefix(*name);  // what the aggregator classifies and interns
    // One string id, one name: the aggregator finds its row without hashing the name.
    k.name_key = static_cast<std::uint64_t>(q.integer(6)) + 1;
    k.grid_x = small(q.integer(7));
    k.grid_y = small(q.integer(8));
    k.grid_z = small(q.integer(9));
    k.block_x = small(q.integer(10));
    k.block_y = small(q.integer(11));
    k.block_z = small(q.integer(12));
    batch_.kernels.push_back(std::move(k));
    taken();
  }

  MemoryKind memory_kind(const SqliteQuery& q, int col) const {
    if (q.null(col)) return MemoryKind::Unknown;
    const std::string* n = memory_kinds_->name(q.integer(col));
    return n ? detail::memory_kind_from_enum(*n) : MemoryKind::Unknown;
  }

  void take_memcpy(const SqliteQuery& q) {
    MemcpyRecord m;
    if (!gpu_row(Source::Memcpy, q, m)) return;
    if (q.integer(6) < 0) return void(skip(Source::Memcpy, Skip::BadValue));
    m.bytes = q.integer(6);
    const std::string* kind = copy_kinds_->name(q.integer(7));
    m.kind = kind ? detail::memcpy_kind_from_enum(*kind) : MemcpyKind::Unknown;
    m.src = memory_kind(q, 8);
    m.dst = memory_kind(q, 9);
    // Without its launching call the copy's API is not known: it stays unknown, never "sync".
    m.async_known = false;
    if (auto it = copy_calls_.find(m.correlation_id); it != copy_calls_.end()) {
      m.async = it->second;
      m.async_known = true;
      copy_calls_.erase(it);
    }
    batch_.memcpys.push_back(m);
    taken();
  }

  void take_memset(const SqliteQuery& q) {
    MemsetRecord m;
    if (!gpu_row(Source::Memset, q, m)) return;
    if (q.integer(6) < 0) return void(skip(Source::Memset, Skip::BadValue));
    m.bytes = q.integer(6);
    batch_.memsets.push_back(m);
    taken();
  }

  void finish_info() {
    for (std::size_t s = 0; s < kSources; ++s)
      for (std::size_t w = 0; w < kSkips; ++w)
        if (const std::int64_t n = skipped_[s][w]) {
          info_.skipped_rows += n;
          info_.skipped.push_back(
              fmt::format("{} {} row{}: {}", n, kSourceNoun[s], n == 1 ? "" : "s", kSkipWhy[w]));
        }
  }

  SqliteDb db_;
  const std::function<void(GpuActivity&&)>& sink_;
  NsightReadOptions options_;
  NsightExportInfo info_;
  std::unordered_map<std::string_view, bool> has_;
  std::unordered_map<std::int64_t, std::string> strings_;
  struct NameHash : std::hash<std::string_view> {
    using is_transparent = void;
  };
  std::unordered_map<std::string, NsightExportInfo::RangeName, NameHash, std::equal_to<>>
      range_names_;
  std::vector<std::int64_t> processes_;  // of options_.device
  std::vector<std::int64_t> fathom_domains_;
  std::unique_ptr<EnumTable> sync_types_, copy_kinds_, memory_kinds_;
  std::vector<Cursor> cursors_;
  std::unordered_map<std::int64_t, std::uint32_t> process_slots_;
  std::unordered_map<std::uint64_t, std::vector<OpenPhase>> open_phases_;
  std::unordered_map<std::uint64_t, bool> copy_calls_;  // correlation -> asked asynchronously
  std::unordered_set<std::uint64_t> query_calls_;       // correlations of event / stream queries
  std::array<std::array<std::int64_t, kSkips>, kSources> skipped_{};
  GpuActivity batch_;
  std::size_t held_ = 0;
};

}  // namespace

bool is_sqlite_file(const std::string& path) {
  // Checked before anything can wait on it: `fathom analyze FIFO` hung in the open.
  std::string why;
  const int fd = fs::open_regular_file(path, why);
  if (fd < 0) throw Error(why);
  char head[16] = {};
  const ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  if (n == sizeof head && std::memcmp(head, "SQLite format 3", 16) == 0) return true;
  // A file named as an export is one or an error: read as a trace it would be "not valid JSON",
  // which sends its owner looking in the wrong place.
  const std::string_view name(path);
  for (std::string_view suffix : {".sqlite", ".sqlite3", ".db"})
    if (name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix)
      throw Error(fmt::format(
          "{} is not an Nsight Systems export: {}, not a SQLite database; give the file `nsys "
          "export --type sqlite REPORT.nsys-rep` writes (it starts with \"SQLite format 3\")",
          path, n == 0 ? "it is empty" : "its first bytes are not SQLite's header"));
  return false;
}

NsightExportInfo read_nsight_export(const std::string& path,
                                    const std::function<void(GpuActivity&&)>& sink,
                                    const NsightReadOptions& options) {
  NsightReadOptions o = options;
  o.batch_records = std::max<std::size_t>(1, o.batch_records);
  return Reader(path, sink, o).run();
}

GpuActivity load_nsight_export(const std::string& path, NsightExportInfo* info) {
  GpuActivity all;
  NsightExportInfo i =
      read_nsight_export(path, [&](GpuActivity&& b) { detail::append_batch(all, std::move(b)); });
  if (info) *info = std::move(i);
  return all;
}

}  // namespace fathom
