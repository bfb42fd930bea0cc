#include "formats/activity_file.h"

#include <fathom/error.h>
#include <fmt/format.h>

#include <array>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/annotation_roles.h"
#include "base/json_fields.h"
#include "base/json_number.h"
#include "base/warning_sink.h"
#include "formats/activity_batches.h"
#include "formats/gz_file.h"

namespace fathom {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "fathom.gpu_activity";

std::string_view sync_kind_name(SyncKind k) {
  switch (k) {
    case SyncKind::Event:
      return "event";
    case SyncKind::Stream:
      return "stream";
    case SyncKind::StreamWaitEvent:
      return "stream_wait_event";
    case SyncKind::Context:
      return "context";
    case SyncKind::Device:
      return "device";
    case SyncKind::Unknown:
      break;
  }
  return "unknown";
}

}  // namespace
}  // namespace fathom

namespace fathom::detail {

template <>
struct JsonCodec<SyncKind> {
  static nlohmann::json write(SyncKind k) { return std::string(sync_kind_name(k)); }
  static void read(const nlohmann::json& j, SyncKind& k) {
    k = enum_from_name(j,
                       {SyncKind::Unknown, SyncKind::Event, SyncKind::Stream,
                        SyncKind::StreamWaitEvent, SyncKind::Context, SyncKind::Device},
                       sync_kind_name, "synchronization kind");
  }
};

// A kernel's grid or block, [x, y, z].
template <>
struct JsonCodec<std::array<std::int32_t, 3>> {
  static nlohmann::json write(const std::array<std::int32_t, 3>& d) {
    return nlohmann::json::array({d[0], d[1], d[2]});
  }
  static void read(const nlohmann::json& j, std::array<std::int32_t, 3>& d) {
    for (std::size_t i = 0; i < 3; ++i) d[i] = json_integer<std::int32_t>(j.at(i));
  }
};

// start_ns and end_ns, each read inside the range the analyses' arithmetic holds.
template <typename V, typename R>
static void times(V& v, R& r) {
  v("start_ns", r.start_ns);
  v("end_ns", r.end_ns);
  if constexpr (!V::writing) {
    checked_time_ns(r.start_ns, "start_ns");
    checked_time_ns(r.end_ns, "end_ns");
  }
}

// When a launched record ran and what launched it: a device record's span, a sync, a runtime call.
template <typename V, typename R>
static void launched(V& v, R& r) {
  times(v, r);
  v("correlation_id", r.correlation_id);
  v("external_id", r.external_id);
  v("phase", r.phase);
}

// The span a kernel, a copy and a memset share (gpu_records.h), described the one way for all.
template <typename V>
static void fields(V& v, GpuSpan& s) {
  v("device", s.device);
  v("stream", s.stream);
  launched(v, s);
}

template <typename V>
static void fields(V& v, KernelRecord& k) {
  v("name", k.name);
  fields(v, static_cast<GpuSpan&>(k));
  std::array<std::int32_t, 3> grid{k.grid_x, k.grid_y, k.grid_z};
  std::array<std::int32_t, 3> block{k.block_x, k.block_y, k.block_z};
  v("grid", grid);
  v("block", block);
  if constexpr (!V::writing) {
    k.grid_x = grid[0], k.grid_y = grid[1], k.grid_z = grid[2];
    k.block_x = block[0], k.block_y = block[1], k.block_z = block[2];
  }
}

template <typename V>
static void fields(V& v, MemcpyRecord& m) {
  v("kind", m.kind);
  v("src", m.src);
  v("dst", m.dst);
  v("bytes", m.bytes);
  fields(v, static_cast<GpuSpan&>(m));
  v("async", m.async);
  v.since("async_known", m.async_known);
}

template <typename V>
static void fields(V& v, MemsetRecord& m) {
  v("bytes", m.bytes);
  fields(v, static_cast<GpuSpan&>(m));
}

template <typename V>
static void fields(V& v, SyncRecord& s) {
  v("kind", s.kind);
  v("stream", s.stream);
  launched(v, s);
}

template <typename V>
static void fields(V& v, RuntimeCallRecord& r) {
  v("name", r.name);
  v("thread", r.thread);
  launched(v, r);
}

template <typename V>
static void fields(V& v, OpRecord& o) {
  v("name", o.name);
  v("sequence_nr", o.sequence_nr);
  v("thread", o.thread);
  times(v, o);
  v("external_id", o.external_id);
  v("input_shapes", o.input_shapes);
  v("input_dtypes", o.input_dtypes);
}

// The file keeps an annotation's name only (format version 1): its role is the name's, as for a
// trace, and the reader classifies it again.
template <typename V>
static void fields(V& v, AnnotationRecord& a) {
  v("name", a.name);
  v("thread", a.thread);
  times(v, a);
}

}  // namespace fathom::detail

namespace fathom {
namespace {

using nlohmann::json;

// --- writing ---

void write_line(detail::OutputFile& out, const json& j) {
  std::string line = j.dump();
  line += '\n';
  out.write(line);
}

// One line: the record's fields and its "type".
template <typename R>
json record_json(const R& r, const char* type) {
  json j = detail::write_json(r);
  j["type"] = type;
  return j;
}

json record_json(const DeviceProperties& d) { return record_json(d, "device"); }
json record_json(const KernelRecord& k) { return record_json(k, "kernel"); }
json record_json(const MemcpyRecord& m) { return record_json(m, "memcpy"); }
json record_json(const MemsetRecord& m) { return record_json(m, "memset"); }
json record_json(const SyncRecord& s) { return record_json(s, "sync"); }
json record_json(const RuntimeCallRecord& r) { return record_json(r, "runtime"); }
json record_json(const OpRecord& o) { return record_json(o, "op"); }
json record_json(const AnnotationRecord& a) { return record_json(a, "annotation"); }

// --- reading ---

template <typename T>
void get(const json& j, const char* key, T& v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    v = detail::json_integer<T>(j.at(key));
  else
    j.at(key).get_to(v);
}

// Adds the record on one line to batch; returns false for the end line.
bool read_record(const json& j, GpuActivity& batch, std::int64_t& dropped_lines,
                 std::int64_t& end_count) {
  using detail::read_json;
  const std::string type = j.at("type").get<std::string>();
  if (type == "kernel") {
    batch.kernels.push_back(read_json<KernelRecord>(j));
  } else if (type == "memcpy") {
    batch.memcpys.push_back(read_json<MemcpyRecord>(j));
  } else if (type == "memset") {
    batch.memsets.push_back(read_json<MemsetRecord>(j));
  } else if (type == "sync") {
    batch.syncs.push_back(read_json<SyncRecord>(j));
  } else if (type == "runtime") {
    batch.runtime_calls.push_back(read_json<RuntimeCallRecord>(j));
  } else if (type == "op") {
    batch.ops.push_back(read_json<OpRecord>(j));
  } else if (type == "annotation") {
    AnnotationRecord a = read_json<AnnotationRecord>(j);
    batch.annotations.push_back(
        classified_annotation(std::move(a.name), a.thread, a.start_ns, a.end_ns));
  } else if (type == "device") {
    batch.devices.push_back(read_json<DeviceProperties>(j));
  } else if (type == "dropped") {
    std::int64_t n = 0;
    get(j, "count", n);
    if (n < 0) throw Error(fmt::format("a negative dropped count {}", n));
    // Saturates: a count this large is a corrupted file, still read as "many were dropped".
    batch.dropped_records = n > std::numeric_limits<std::int64_t>::max() - batch.dropped_records
                                ? std::numeric_limits<std::int64_t>::max()
                                : batch.dropped_records + n;
    ++dropped_lines;
  } else if (type == "end") {
    get(j, "records", end_count);
    return false;
  } else {
    throw Error(fmt::format("unknown record type '{}'", type));
  }
  return true;
}

std::size_t batch_size(const GpuActivity& b) {
  return b.devices.size() + b.kernels.size() + b.memcpys.size() + b.memsets.size() +
         b.syncs.size() + b.runtime_calls.size() + b.ops.size() + b.annotations.size();
}

// The header's "format" is a string equal to kFormat (value() would throw on another type).
bool is_header(const json& h) {
  if (h.is_discarded() || !h.is_object()) return false;
  auto f = h.find("format");
  return f != h.end() && f->is_string() && f->get_ref<const std::string&>() == kFormat;
}

void check_header(const std::string& line, const std::string& path) {
  json h = json::parse(line, nullptr, false);
  if (!is_header(h)) {
    throw Error(fmt::format(
        "{} is not a fathom activity file (its first line is not a \"{}\" header)", path, kFormat));
  }
  auto v = h.find("version");
  const std::int64_t version = v != h.end() && v->is_number_integer() ? v->get<std::int64_t>() : -1;
  if (version != kActivityFileVersion) {
    throw Error(fmt::format("{} is activity file version {}; this fathom reads version {}", path,
                            version, kActivityFileVersion));
  }
}

}  // namespace

struct ActivityFileWriter::Impl {
  detail::OutputFile out;
  std::int64_t records = 0;
  explicit Impl(const std::string& path) : out(path) {}

  template <typename R>
  void put(const R& r) {
    write_line(out, record_json(r));
    ++records;
  }
};

ActivityFileWriter::ActivityFileWriter(const std::string& path)
    : impl_(std::make_unique<Impl>(path)) {
  write_line(impl_->out, {{"format", kFormat}, {"version", kActivityFileVersion}});
}

ActivityFileWriter::~ActivityFileWriter() {
  if (!impl_) return;
  try {
    close();
  } catch (...) {
    // A destructor never throws; close() reports the error to a caller who asks.
    detail::swallowed("formats/activity_file.cpp");
  }
}

void ActivityFileWriter::write(const GpuActivity& b) {
  if (!impl_) throw Error("the activity file is already closed");
  // Host records first, in the order a replay needs them.
  for (const auto& r : b.devices) impl_->put(r);
  for (const auto& r : b.annotations) impl_->put(r);
  for (const auto& r : b.ops) impl_->put(r);
  for (const auto& r : b.runtime_calls) impl_->put(r);
  for (const auto& r : b.syncs) impl_->put(r);
  for (const auto& r : b.kernels) impl_->put(r);
  for (const auto& r : b.memcpys) impl_->put(r);
  for (const auto& r : b.memsets) impl_->put(r);
  if (b.dropped_records > 0)
    write_line(impl_->out, {{"type", "dropped"}, {"count", b.dropped_records}});
}

void ActivityFileWriter::close() {
  if (!impl_) return;
  std::unique_ptr<Impl> impl = std::move(impl_);
  write_line(impl->out, {{"type", "end"}, {"records", impl->records}});
  impl->out.close();
}

std::int64_t ActivityFileWriter::records() const noexcept { return impl_ ? impl_->records : 0; }

void save_activity(const GpuActivity& activity, const std::string& path) {
  ActivityFileWriter w(path);
  w.write(activity);
  w.close();
}

void read_activity(const std::string& path, const std::function<void(GpuActivity&&)>& sink,
                   std::size_t batch_records) {
  detail::InputFile in(path, detail::kMaxInputBytes, detail::Content::Json);
  std::string line;
  if (!in.read_line(line))
    throw Error(fmt::format("{} is empty: not a fathom activity file", path));
  check_header(line, path);
  GpuActivity batch;
  std::int64_t line_no = 1, records = 0, dropped_lines = 0, end_count = -1;
  bool ended = false;
  while (in.read_line(line)) {
    ++line_no;
    if (ended) {
      if (line.empty()) continue;
      throw Error(
          fmt::format("{} line {}: records after the end line (corrupted?)", path, line_no));
    }
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw Error(
          fmt::format("{} line {}: not a JSON record (truncated or corrupted?)", path, line_no));
    try {
      ended = !read_record(j, batch, dropped_lines, end_count);
    } catch (const json::exception& e) {
      throw Error(fmt::format("{} line {}: not a valid record: {}", path, line_no, e.what()));
    } catch (const Error& e) {
      throw Error(fmt::format("{} line {}: {}", path, line_no, std::string(e.what()).substr(8)));
    }
    if (ended) continue;
    records = line_no - 1 - dropped_lines;
    if (batch_size(batch) >= batch_records) {
      sink(std::move(batch));
      batch = GpuActivity{};
    }
  }
  if (!ended)
    throw Error(fmt::format("{} is truncated: it ends after {} records without the end line", path,
                            records));
  if (end_count != records)
    throw Error(fmt::format("{}: the end line counts {} records but the file holds {} (corrupted?)",
                            path, end_count, records));
  sink(std::move(batch));
}

GpuActivity load_activity(const std::string& path) {
  GpuActivity all;
  read_activity(
      path, [&](GpuActivity&& b) { detail::append_batch(all, std::move(b)); },
      std::size_t{1} << 62);
  return all;
}

bool is_activity_file(const std::string& path) {
  // The header is the first line; a trace may be one huge line, so look at its start only.
  detail::InputFile in(path, detail::kMaxInputBytes, detail::Content::Json);
  const std::string head = in.peek(256);
  const std::size_t nl = head.find('\n');
  if (nl == std::string::npos) return false;
  // The format alone: a file of another version is still one, and loading it says so.
  const json h = json::parse(head.substr(0, nl), nullptr, false);
  return is_header(h);
}

}  // namespace fathom
