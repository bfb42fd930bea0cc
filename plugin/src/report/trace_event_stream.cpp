#include "report/trace_event_stream.h"

#include <fathom/error.h>
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/warning_sink.h"
#include "formats/gz_file.h"
#include "report/chrome_trace.h"

namespace fathom {
namespace {

constexpr int kGpuPidBase = 2;

// Names come from drivers and user models: invalid UTF-8 is replaced, never a broken file.
void append_string(std::string& out, std::string_view s) {
  out +=
      nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Microseconds with the nanoseconds kept: what the format's "ts" and "dur" hold.
void append_us(std::string& out, std::int64_t ns) {
  const std::int64_t whole = ns / 1000, frac = ns % 1000;
  if (ns < 0 && frac != 0)
    fmt::format_to(std::back_inserter(out), "-{}.{:03}", -whole, -frac);
  else
    fmt::format_to(std::back_inserter(out), "{}.{:03}", whole, frac < 0 ? -frac : frac);
}

struct GpuEvent {
  std::int64_t start, end;
  std::int32_t device, stream;
  std::string name;
  std::string args;
};

}  // namespace

TraceEventStream::TraceEventStream(const std::string& path, std::int64_t origin_ns,
                                   std::string process_name)
    : path_(path),
      file_(std::make_unique<detail::OutputFile>(path)),
      origin_ns_(origin_ns),
      last_host_ns_(origin_ns) {
  // The first line opens the array; every event after it starts with ",\n", so a file cut
  // after any flush is the array's prefix.
  buffer_ = "[\n";
  buffer_ += R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":)";
  append_string(buffer_, process_name + " (host)");
  buffer_ += "}}";
  buffer_ += R"(,
{"name":"process_sort_index","ph":"M","pid":1,"tid":0,"args":{"sort_index":0}})";
  name_track(kHostPid, kTrainingTid, "training thread");
  name_track(kHostPid, kFindingsTid, "fathom: findings and alarms");
  flush();
}

TraceEventStream::~TraceEventStream() {
  if (!file_) return;
  try {
    close(last_host_ns_);
  } catch (const std::exception& e) {
    detail::warn("the trace ", path_, " could not be finished: ", e.what());
  }
}

void TraceEventStream::name_track(int pid, std::int64_t tid, std::string_view name) {
  if (!named_tracks_.insert({pid, tid}).second) return;
  fmt::format_to(std::back_inserter(buffer_),
                 ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{"
                 "\"name\":",
                 pid, tid);
  append_string(buffer_, name);
  buffer_ += "}}";
}

void TraceEventStream::event_prefix(char ph, int pid, std::int64_t tid, std::int64_t ns) {
  fmt::format_to(std::back_inserter(buffer_),
                 ",\n{{\"ph\":\"{}\",\"pid\":{},\"tid\":{},\"ts\":", ph, pid, tid);
  append_us(buffer_, ns - origin_ns_);
  ++events_;
}

void TraceEventStream::begin(std::string_view name, std::string_view category, std::int64_t ns) {
  if (!file_) return;
  last_host_ns_ = std::max(last_host_ns_, ns);
  event_prefix('B', kHostPid, kTrainingTid, last_host_ns_);
  buffer_ += ",\"name\":";
  append_string(buffer_, name);
  buffer_ += ",\"cat\":";
  append_string(buffer_, category);
  buffer_ += "}";
  ++open_;
  maybe_flush();
}

void TraceEventStream::end(std::int64_t ns) {
  if (!file_ || open_ == 0) return;  // an end without its begin would unbalance the thread
  last_host_ns_ = std::max(last_host_ns_, ns);
  event_prefix('E', kHostPid, kTrainingTid, last_host_ns_);
  buffer_ += "}";
  --open_;
  maybe_flush();
}

void TraceEventStream::complete(std::string_view name, std::string_view category,
                                std::int64_t begin_ns, std::int64_t end_ns) {
  if (!file_) return;
  begin_ns = std::max(last_host_ns_, begin_ns);
  end_ns = std::max(begin_ns, end_ns);
  last_host_ns_ = end_ns;
  event_prefix('X', kHostPid, kTrainingTid, begin_ns);
  buffer_ += ",\"dur\":";
  append_us(buffer_, end_ns - begin_ns);
  buffer_ += ",\"name\":";
  append_string(buffer_, name);
  buffer_ += ",\"cat\":";
  append_string(buffer_, category);
  buffer_ += "}";
  maybe_flush();
}

void TraceEventStream::instant(std::string_view name, std::string_view category, std::int64_t ns,
                               std::string_view args_json) {
  if (!file_) return;
  event_prefix('i', kHostPid, kFindingsTid, ns);
  buffer_ += R"(,"s":"p","name":)";
  append_string(buffer_, name);
  buffer_ += ",\"cat\":";
  append_string(buffer_, category);
  if (!args_json.empty()) {
    buffer_ += ",\"args\":";
    buffer_ += args_json;
  }
  buffer_ += "}";
  maybe_flush();
}

void TraceEventStream::gpu(const GpuActivity& batch) {
  if (!file_) return;
  std::vector<GpuEvent> events;
  events.reserve(batch.kernels.size() + batch.memcpys.size() + batch.memsets.size());
  for (const KernelRecord& k : batch.kernels)
    events.push_back({k.start_ns, k.end_ns, k.device, k.stream, k.name,
                      fmt::format(R"({{"correlation":{},"grid":[{},{},{}],"block":[{},{},{}]}})",
                                  k.correlation_id, k.grid_x, k.grid_y, k.grid_z, k.block_x,
                                  k.block_y, k.block_z)});
  for (const MemcpyRecord& m : batch.memcpys)
    events.push_back({m.start_ns, m.end_ns, m.device, m.stream, memcpy_event_name(m.kind),
                      fmt::format(R"({{"bytes":{},"async":{},"correlation":{}}})", m.bytes, m.async,
                                  m.correlation_id)});
  for (const MemsetRecord& m : batch.memsets)
    events.push_back({m.start_ns, m.end_ns, m.device, m.stream, "Memset",
                      fmt::format(R"({{"bytes":{}}})", m.bytes)});
  // Each stream's events in time order: a stream runs one thing at a time, and a track whose
  // timestamps go back reads as overlapping work.
  std::stable_sort(events.begin(), events.end(), [](const GpuEvent& a, const GpuEvent& b) {
    return std::tie(a.device, a.stream, a.start) < std::tie(b.device, b.stream, b.start);
  });
  for (const GpuEvent& e : events) {
    const int pid = kGpuPidBase + e.device;
    if (named_tracks_.insert({pid, -1}).second) {
      fmt::format_to(std::back_inserter(buffer_),
                     ",\n{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\"args\":{{"
                     "\"name\":",
                     pid);
      append_string(buffer_, gpu_process_name(e.device, batch.devices));
      fmt::format_to(std::back_inserter(buffer_),
                     "}}}},\n{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":0,"
                     "\"args\":{{\"sort_index\":{}}}}}",
                     pid, 1 + e.device);
    }
    name_track(pid, e.stream, "stream " + std::to_string(e.stream));
    event_prefix('X', pid, e.stream, e.start);
    buffer_ += ",\"dur\":";
    append_us(buffer_, std::max<std::int64_t>(e.end - e.start, 0));
    buffer_ += ",\"name\":";
    append_string(buffer_, e.name);
    buffer_ += ",\"cat\":\"gpu\",\"args\":";
    buffer_ += e.args;
    buffer_ += "}";
  }
  maybe_flush();
}

void TraceEventStream::maybe_flush() {
  if (buffer_.size() >= kFlushBytes) flush();
}

void TraceEventStream::flush() {
  if (!file_ || buffer_.empty()) return;
  file_->write(buffer_);
  file_->flush();
  buffer_.clear();
}

void TraceEventStream::close(std::int64_t ns) {
  if (!file_) return;
  while (open_ > 0) end(ns);
  buffer_ += "\n]\n";
  flush();
  auto file = std::move(file_);
  file->close();
}

}  // namespace fathom
