#include "formats/activity_file.h"

#include <fathom/error.h>
#include <fmt/format.h>

#include <array>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/annotation_roles.h"
#include "base/json_number.h"
#include "base/warning_sink.h"
#include "formats/activity_batches.h"
#include "formats/gz_file.h"

namespace fathom {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "fathom.gpu_activity";

json phase_json(const std::optional<Phase>& p) {
  return p ? json(std::string(phase_name(*p))) : json(nullptr);
}

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

template <typename Kind, std::size_t N, typename NameOf>
Kind kind_from(const json& j, const std::array<Kind, N>& kinds, NameOf name_of, const char* what) {
  const auto s = j.get<std::string>();
  for (Kind k : kinds)
    if (name_of(k) == s) return k;
  throw Error(fmt::format("unknown {} '{}'", what, s));
}

constexpr std::array kMemcpyKinds{MemcpyKind::Unknown,      MemcpyKind::HostToDevice,
                                  MemcpyKind::DeviceToHost, MemcpyKind::DeviceToDevice,
                                  MemcpyKind::HostToHost,   MemcpyKind::PeerToPeer};
constexpr std::array kMemoryKinds{MemoryKind::Unknown, MemoryKind::Pageable, MemoryKind::Pinned,
                                  MemoryKind::Device, MemoryKind::Managed};
constexpr std::array kSyncKinds{SyncKind::Unknown,         SyncKind::Event,   SyncKind::Stream,
                                SyncKind::StreamWaitEvent, SyncKind::Context, SyncKind::Device};

std::optional<Phase> phase_from(const json& j) {
  const json& p = j.at("phase");
  if (p.is_null()) return std::nullopt;
  const auto s = p.get<std::string>();
  if (auto phase = phase_from_name(s)) return phase;
  throw Error(fmt::format("unknown phase '{}'", s));
}

// --- writing ---

void write_line(detail::OutputFile& out, const json& j) {
  std::string line = j.dump();
  line += '\n';
  out.write(line);
}

json record_json(const DeviceProperties& d) {
  return {{"type", "device"},
          {"id", d.id},
          {"name", d.name},
          {"compute_major", d.compute_major},
          {"compute_minor", d.compute_minor},
          {"total_memory_bytes", d.total_memory_bytes}};
}

// The span a kernel, a copy and a memset share (gpu_records.h), written the one way for all.
json with_span(json j, const GpuSpan& s) {
  j["device"] = s.device;
  j["stream"] = s.stream;
  j["start_ns"] = s.start_ns;
  j["end_ns"] = s.end_ns;
  j["correlation_id"] = s.correlation_id;
  j["external_id"] = s.external_id;
  j["phase"] = phase_json(s.phase);
  return j;
}

json record_json(const KernelRecord& k) {
  return with_span({{"type", "kernel"},
                    {"name", k.name},
                    {"grid", {k.grid_x, k.grid_y, k.grid_z}},
                    {"block", {k.block_x, k.block_y, k.block_z}}},
                   k);
}

json record_json(const MemcpyRecord& m) {
  return with_span({{"type", "memcpy"},
                    {"kind", std::string(memcpy_kind_name(m.kind))},
                    {"src", std::string(memory_kind_name(m.src))},
                    {"dst", std::string(memory_kind_name(m.dst))},
                    {"bytes", m.bytes},
                    {"async", m.async},
                    {"async_known", m.async_known}},
                   m);
}

json record_json(const MemsetRecord& m) {
  return with_span({{"type", "memset"}, {"bytes", m.bytes}}, m);
}

json record_json(const SyncRecord& s) {
  return {{"type", "sync"},
          {"kind", std::string(sync_kind_name(s.kind))},
          {"stream", s.stream},
          {"start_ns", s.start_ns},
          {"end_ns", s.end_ns},
          {"correlation_id", s.correlation_id},
          {"external_id", s.external_id},
          {"phase", phase_json(s.phase)}};
}

json record_json(const RuntimeCallRecord& r) {
  return {{"type", "runtime"},
          {"name", r.name},
          {"thread", r.thread},
          {"start_ns", r.start_ns},
          {"end_ns", r.end_ns},
          {"correlation_id", r.correlation_id},
          {"external_id", r.external_id},
          {"phase", phase_json(r.phase)}};
}

json record_json(const OpRecord& o) {
  return {{"type", "op"},
          {"name", o.name},
          {"sequence_nr", o.sequence_nr},
          {"thread", o.thread},
          {"start_ns", o.start_ns},
          {"end_ns", o.end_ns},
          {"external_id", o.external_id},
          {"input_shapes", o.input_shapes},
          {"input_dtypes", o.input_dtypes}};
}

json record_json(const AnnotationRecord& a) {
  return {{"type", "annotation"},
          {"name", a.name},
          {"thread", a.thread},
          {"start_ns", a.start_ns},
          {"end_ns", a.end_ns}};
}

// --- reading ---

template <typename T>
void get(const json& j, const char* key, T& v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    v = detail::json_integer<T>(j.at(key));
  else
    j.at(key).get_to(v);
}

// start_ns and end_ns, each inside the range the analyses' arithmetic holds.
template <typename R>
void get_times(const json& j, R& r) {
  get(j, "start_ns", r.start_ns);
  get(j, "end_ns", r.end_ns);
  detail::checked_time_ns(r.start_ns, "start_ns");
  detail::checked_time_ns(r.end_ns, "end_ns");
}

std::vector<std::vector<std::int64_t>> shapes_from(const json& j) {
  std::vector<std::vector<std::int64_t>> shapes;
  for (const json& s : j) {
    std::vector<std::int64_t>& shape = shapes.emplace_back();
    for (const json& d : s) shape.push_back(detail::json_integer<std::int64_t>(d));
  }
  return shapes;
}

// The span a kernel, a copy and a memset share, read the one way for all.
void get_span(const json& j, GpuSpan& s) {
  get(j, "device", s.device);
  get(j, "stream", s.stream);
  get_times(j, s);
  get(j, "correlation_id", s.correlation_id);
  get(j, "external_id", s.external_id);
  s.phase = phase_from(j);
}

// Adds the record on one line to batch; returns false for the end line.
bool read_record(const json& j, GpuActivity& batch, std::int64_t& dropped_lines,
                 std::int64_t& end_count) {
  const std::string type = j.at("type").get<std::string>();
  if (type == "kernel") {
    KernelRecord k;
    get(j, "name", k.name);
    get_span(j, k);
    const json& g = j.at("grid");
    const json& b = j.at("block");
    auto dim = [](const json& d, std::size_t i) { return detail::json_integer<int>(d.at(i)); };
    k.grid_x = dim(g, 0), k.grid_y = dim(g, 1), k.grid_z = dim(g, 2);
    k.block_x = dim(b, 0), k.block_y = dim(b, 1), k.block_z = dim(b, 2);
    batch.kernels.push_back(std::move(k));
  } else if (type == "memcpy") {
    MemcpyRecord m;
    m.kind = kind_from(j.at("kind"), kMemcpyKinds, memcpy_kind_name, "copy kind");
    m.src = kind_from(j.at("src"), kMemoryKinds, memory_kind_name, "memory kind");
    m.dst = kind_from(j.at("dst"), kMemoryKinds, memory_kind_name, "memory kind");
    get(j, "bytes", m.bytes);
    get_span(j, m);
    get(j, "async", m.async);
    if (j.contains("async_known")) get(j, "async_known", m.async_known);
    batch.memcpys.push_back(m);
  } else if (type == "memset") {
    MemsetRecord m;
    get(j, "bytes", m.bytes);
    get_span(j, m);
    batch.memsets.push_back(m);
  } else if (type == "sync") {
    SyncRecord s;
    s.kind = kind_from(j.at("kind"), kSyncKinds, sync_kind_name, "synchronization kind");
    get(j, "stream", s.stream);
    get_times(j, s);
    get(j, "correlation_id", s.correlation_id);
    get(j, "external_id", s.external_id);
    s.phase = phase_from(j);
    batch.syncs.push_back(s);
  } else if (type == "runtime") {
    RuntimeCallRecord r;
    get(j, "name", r.name);
    get(j, "thread", r.thread);
    get_times(j, r);
    get(j, "correlation_id", r.correlation_id);
    get(j, "external_id", r.external_id);
    r.phase = phase_from(j);
    batch.runtime_calls.push_back(std::move(r));
  } else if (type == "op") {
    OpRecord o;
    get(j, "name", o.name);
    get(j, "sequence_nr", o.sequence_nr);
    get(j, "thread", o.thread);
    get_times(j, o);
    get(j, "external_id", o.external_id);
    o.input_shapes = shapes_from(j.at("input_shapes"));
    get(j, "input_dtypes", o.input_dtypes);
    batch.ops.push_back(std::move(o));
  } else if (type == "annotation") {
    AnnotationRecord a;
    get(j, "name", a.name);
    get(j, "thread", a.thread);
    get_times(j, a);
    // The file keeps the name only (format version 1); its role is the name's, as for a trace.
    batch.annotations.push_back(
        classified_annotation(std::move(a.name), a.thread, a.start_ns, a.end_ns));
  } else if (type == "device") {
    DeviceProperties d;
    get(j, "id", d.id);
    get(j, "name", d.name);
    get(j, "compute_major", d.compute_major);
    get(j, "compute_minor", d.compute_minor);
    get(j, "total_memory_bytes", d.total_memory_bytes);
    batch.devices.push_back(std::move(d));
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
