#include <fathom/error.h>
#include <fathom/trace_files.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "base/annotation_roles.h"
#include "base/json_number.h"
#include "formats/gz_file.h"

namespace fathom {
namespace {

using nlohmann::json;

enum class Category { Skip, Kernel, Memcpy, Memset, Runtime, Op, Annotation, Sync };

Category category_of(std::string_view cat) {
  std::string c(cat);
  std::transform(c.begin(), c.end(), c.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (c == "kernel") return Category::Kernel;
  if (c == "memcpy" || c == "gpu_memcpy") return Category::Memcpy;
  if (c == "memset" || c == "gpu_memset") return Category::Memset;
  if (c == "runtime" || c == "cuda_runtime" || c == "cuda_driver") return Category::Runtime;
  if (c == "operator" || c == "cpu_op") return Category::Op;
  if (c == "user_annotation") return Category::Annotation;
  if (c == "cuda_sync") return Category::Sync;
  return Category::Skip;  // gpu_user_annotation (a GPU-side copy of a user annotation), flows,
                          // python
}

// Microseconds (Kineto's unit) to nanoseconds, inside the range the analyses' arithmetic holds.
std::int64_t to_ns(double us, const char* what) {
  const double ns = us * 1000.0;
  if (!(ns >= 0 && ns <= static_cast<double>(detail::kMaxTimeNs)))
    throw Error(fmt::format("\"{}\": {} us is outside 0 to 2^62 ns (corrupted?)", what, us));
  return std::llround(ns);
}

// The number in v (a field's value, null when the event has none), or fallback when it is not
// one. Integers convert as Kineto means them (a stream 4294967295 is -1); a float that no
// integer of T holds is an error naming the field.
template <typename T>
T number(const json& v, const char* key, T fallback = 0) {
  if (!v.is_number()) return fallback;
  if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_float()) return v.get<T>();
    try {
      return detail::json_integer<T>(v);
    } catch (const Error& e) {
      throw Error(fmt::format("\"{}\": {}", key, std::string(e.what()).substr(8)));
    }
  } else {
    return v.get<T>();
  }
}

// The fields of one trace event the reader uses, each the value its last occurrence had (as a
// JSON object keeps the last of duplicate keys), null where the event has none. The SAX parser
// below fills them as it reads: no document tree is built, for the event or for the trace.
enum EventField : std::uint8_t { kPh, kCat, kName, kTs, kDur, kPid, kTid, kEventFields };
enum ArgField : std::uint8_t {
  kExternalId,      // "External id"
  kExternalIdOld,   // "external id" (2021 traces)
  kCorrelation,     // "correlation"
  kDevice,          // "device"
  kStream,          // "stream"
  kGrid,            // "grid"
  kBlock,           // "block"
  kBytes,           // "bytes"
  kSyncKind,        // "cuda_sync_kind"
  kSequenceNumber,  // "Sequence number"
  kInputDims,       // "Input Dims"
  kInputType,       // "Input type"
  kArgFields
};

int event_field(std::string_view k) noexcept {
  if (k == "ph") return kPh;
  if (k == "cat") return kCat;
  if (k == "name") return kName;
  if (k == "ts") return kTs;
  if (k == "dur") return kDur;
  if (k == "pid") return kPid;
  if (k == "tid") return kTid;
  return -1;
}

int arg_field(std::string_view k) noexcept {
  static constexpr std::string_view kNames[kArgFields] = {
      "External id", "external id", "correlation", "device",         "stream",
      "grid",        "block",       "bytes",       "cuda_sync_kind", "Sequence number",
      "Input Dims",  "Input type"};
  for (int i = 0; i < kArgFields; ++i)
    if (kNames[i] == k) return i;
  return -1;
}

struct EventFields {
  bool has_ph = false;  // a "ph" key, whatever its value: what makes an object a trace event
  std::array<json, kEventFields> event;
  std::array<json, kArgFields> args;  // all null unless the last "args" is an object

  void clear_args() {
    for (json& a : args) a = nullptr;
  }
  void clear() {
    has_ph = false;
    for (json& e : event) e = nullptr;
    clear_args();
  }
};

// Kernels and copies say "external id" in 2021 traces; ops always said "External id".
std::uint64_t external_id(const EventFields& f) {
  auto v = number<std::int64_t>(f.args[kExternalId], "External id", -1);
  if (v < 0) v = number<std::int64_t>(f.args[kExternalIdOld], "external id", 0);
  return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

std::uint64_t correlation(const EventFields& f) {
  const auto v = number<std::int64_t>(f.args[kCorrelation], "correlation", 0);
  return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

// tid is a number, a numeric string, or a label ("stream 7"): labels get a stable id.
std::uint64_t thread_of(const json& tid) {
  if (tid.is_number_integer()) return static_cast<std::uint64_t>(tid.get<std::int64_t>());
  if (tid.is_string()) {
    const auto& s = tid.get_ref<const std::string&>();
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (!s.empty() && ec == std::errc() && end == s.data() + s.size()) return v;
    return std::hash<std::string>{}(s);  // a label, or digits too many for a number
  }
  return 0;
}

std::array<std::int32_t, 3> dim3(const json& v) {
  std::array<std::int32_t, 3> d{0, 0, 0};
  if (!v.is_array()) return d;
  for (std::size_t i = 0; i < 3 && i < v.size(); ++i)
    if (v[i].is_number_float())
      d[i] = detail::json_integer<std::int32_t>(v[i]);
    else if (v[i].is_number())
      d[i] = v[i].get<std::int32_t>();
  return d;
}

MemoryKind memory_kind(std::string_view s) {
  if (s == "Pageable") return MemoryKind::Pageable;
  if (s == "Pinned") return MemoryKind::Pinned;
  if (s == "Device") return MemoryKind::Device;
  if (s == "Managed") return MemoryKind::Managed;
  return MemoryKind::Unknown;
}

// "Memcpy HtoD (Pageable -> Device)"
void parse_copy_name(std::string_view name, MemcpyRecord& m) {
  if (name.find("HtoD") != std::string_view::npos)
    m.kind = MemcpyKind::HostToDevice;
  else if (name.find("DtoH") != std::string_view::npos)
    m.kind = MemcpyKind::DeviceToHost;
  else if (name.find("DtoD") != std::string_view::npos)
    m.kind = MemcpyKind::DeviceToDevice;
  else if (name.find("HtoH") != std::string_view::npos)
    m.kind = MemcpyKind::HostToHost;
  else if (name.find("PtoP") != std::string_view::npos)
    m.kind = MemcpyKind::PeerToPeer;
  const auto open = name.find('(');
  const auto arrow = name.find(" -> ");
  const auto close = name.find(')');
  if (open == std::string_view::npos || arrow == std::string_view::npos ||
      close == std::string_view::npos || !(open < arrow && arrow < close))
    return;
  m.src = memory_kind(name.substr(open + 1, arrow - open - 1));
  m.dst = memory_kind(name.substr(arrow + 4, close - arrow - 4));
}

SyncKind sync_kind(std::string_view s) {
  if (s == "Stream Sync") return SyncKind::Stream;
  if (s == "Event Sync") return SyncKind::Event;
  if (s == "Context Sync") return SyncKind::Context;
  if (s == "Device Sync") return SyncKind::Device;
  if (s == "Stream Wait Event") return SyncKind::StreamWaitEvent;
  return SyncKind::Unknown;
}

struct Builder {
  std::string source;
  GpuActivity a;
  std::vector<DeviceProperties> all_devices;
  std::set<std::int32_t> used_devices;
  std::int64_t events = 0;  // objects with a "ph": what makes this a trace at all

  // A field of a device object, null when it has none.
  static const json& at(const json& d, const char* key) {
    static const json kNone;
    auto it = d.find(key);
    return it == d.end() ? kNone : *it;
  }

  void device(const json& d) {
    if (!d.is_object()) return;
    DeviceProperties p;
    p.id = number<std::int32_t>(at(d, "id"), "id");
    if (auto n = d.find("name"); n != d.end() && n->is_string()) p.name = n->get<std::string>();
    p.compute_major = number<int>(at(d, "computeMajor"), "computeMajor");
    p.compute_minor = number<int>(at(d, "computeMinor"), "computeMinor");
    p.total_memory_bytes = number<std::int64_t>(at(d, "totalGlobalMem"), "totalGlobalMem");
    all_devices.push_back(std::move(p));
  }

  void event(EventFields& f) {
    if (!f.has_ph) return;
    ++events;
    const json& ph = f.event[kPh];
    if (!ph.is_string() || ph.get_ref<const std::string&>() != "X") return;
    const json& cat = f.event[kCat];
    const json& ts = f.event[kTs];
    if (!cat.is_string() || !ts.is_number()) return;
    const Category c = category_of(cat.get_ref<const std::string&>());
    if (c == Category::Skip) return;
    std::string name;
    if (json& n = f.event[kName]; n.is_string()) name = std::move(n.get_ref<std::string&>());
    const std::int64_t start = to_ns(ts.get<double>(), "ts");
    const std::int64_t dur = to_ns(std::max(0.0, number<double>(f.event[kDur], "dur")), "dur");
    if (dur > detail::kMaxTimeNs - start)
      throw Error(fmt::format("\"ts\" + \"dur\" ends past 2^62 ns (corrupted?)"));
    const std::int64_t end = start + dur;
    const auto& args = f.args;
    const auto device =
        number<std::int32_t>(args[kDevice], "device", number<std::int32_t>(f.event[kPid], "pid"));

    // The span a kernel, a copy and a memset share (gpu_records.h), read the one way for all.
    auto device_span = [&] {
      GpuSpan span;
      span.device = device;
      span.stream = number<std::int32_t>(args[kStream], "stream");
      span.start_ns = start;
      span.end_ns = end;
      span.correlation_id = correlation(f);
      span.external_id = external_id(f);
      used_devices.insert(device);
      return span;
    };

    switch (c) {
      case Category::Kernel: {
        KernelRecord k;
        static_cast<GpuSpan&>(k) = device_span();
        k.name = std::move(name);
        const auto g = dim3(args[kGrid]), b = dim3(args[kBlock]);
        k.grid_x = g[0], k.grid_y = g[1], k.grid_z = g[2];
        k.block_x = b[0], k.block_y = b[1], k.block_z = b[2];
        a.kernels.push_back(std::move(k));
        break;
      }
      case Category::Memcpy: {
        MemcpyRecord m;
        static_cast<GpuSpan&>(m) = device_span();
        parse_copy_name(name, m);
        m.bytes = number<std::int64_t>(args[kBytes], "bytes");
        a.memcpys.push_back(m);
        break;
      }
      case Category::Memset: {
        MemsetRecord m;
        static_cast<GpuSpan&>(m) = device_span();
        m.bytes = number<std::int64_t>(args[kBytes], "bytes");
        a.memsets.push_back(m);
        break;
      }
      case Category::Sync: {
        SyncRecord s;
        if (const json& k = args[kSyncKind]; k.is_string())
          s.kind = sync_kind(k.get_ref<const std::string&>());
        else
          s.kind = sync_kind(name);
        s.stream = number<std::int32_t>(args[kStream], "stream", -1);
        s.start_ns = start;
        s.end_ns = end;
        s.correlation_id = correlation(f);
        s.external_id = external_id(f);
        a.syncs.push_back(s);
        break;
      }
      case Category::Runtime: {
        RuntimeCallRecord r;
        r.name = std::move(name);
        r.thread = thread_of(f.event[kTid]);
        r.start_ns = start;
        r.end_ns = end;
        r.correlation_id = correlation(f);
        r.external_id = external_id(f);
        a.runtime_calls.push_back(std::move(r));
        break;
      }
      case Category::Annotation:
        a.annotations.push_back(
            classified_annotation(std::move(name), thread_of(f.event[kTid]), start, end));
        break;
      case Category::Op:
        op(f, std::move(name), start, end);
        break;
      case Category::Skip:
        break;
    }
  }

  void op(const EventFields& f, std::string name, std::int64_t start, std::int64_t end) {
    // record_function scopes (ProfilerStep#N, the DataLoader, optimizers) were Operators in 2021.
    const AnnotationMeaning m = annotation_meaning(name);
    if (m.role != AnnotationRole::None) {
      a.annotations.push_back(
          AnnotationRecord{name, thread_of(f.event[kTid]), start, end, m.role, m.phase});
      // Autograd's nodes and their evaluate_function wrappers are both: the backward phase, and
      // ops (MmBackward0 can be the op a kernel's external id names).
      if (m.phase != Phase::Backward) return;
    }
    OpRecord o;
    o.name = std::move(name);
    o.sequence_nr = number<std::int64_t>(f.args[kSequenceNumber], "Sequence number", -1);
    o.thread = thread_of(f.event[kTid]);
    o.start_ns = start;
    o.end_ns = end;
    o.external_id = external_id(f);
    if (const json& dims = f.args[kInputDims]; dims.is_array()) {
      for (const json& d : dims) {
        std::vector<std::int64_t> shape;
        // A tensor's sizes; anything else (a scalar, a TensorList) is recorded as no shape.
        if (d.is_array() &&
            std::all_of(d.begin(), d.end(), [](const json& x) { return x.is_number_integer(); }))
          for (const json& x : d) shape.push_back(x.get<std::int64_t>());
        o.input_shapes.push_back(std::move(shape));
      }
    }
    if (const json& types = f.args[kInputType]; types.is_array())
      for (const json& t : types)
        o.input_dtypes.push_back(t.is_string() ? t.get<std::string>() : std::string());
    a.ops.push_back(std::move(o));
  }

  void finish() {
    // A copy is asynchronous when the call that issued it was (cudaMemcpyAsync, not cudaMemcpy).
    std::unordered_map<std::uint64_t, const std::string*> call_of;
    for (const MemcpyRecord& m : a.memcpys)
      if (m.correlation_id) call_of.emplace(m.correlation_id, nullptr);
    for (const RuntimeCallRecord& r : a.runtime_calls) {
      auto it = call_of.find(r.correlation_id);
      if (it != call_of.end()) it->second = &r.name;
    }
    for (MemcpyRecord& m : a.memcpys) {
      auto it = call_of.find(m.correlation_id);
      m.async_known = it != call_of.end() && it->second;  // no call recorded: not known
      if (m.async_known) m.async = it->second->find("Async") != std::string::npos;
    }
    // deviceProperties lists every GPU of the machine; keep those the trace used.
    for (DeviceProperties& d : all_devices)
      if (used_devices.count(d.id)) a.devices.push_back(std::move(d));
  }
};

// Reads the trace's JSON as nlohmann's SAX parser hands it over: each trace event's fields go
// into EventFields and the event into the Builder when its object ends, each device object of
// deviceProperties into the Builder whole; everything else is skipped as it is read. Where the
// callback parser built every event as a tree (an object per key, a string per value, all freed
// again) and kept the file's text whole, memory now holds one block of the input and one event:
// 2M kernels of 210-byte names (a 1.1 GB trace) took 1.8 GB and 30 s, see BENCHMARKS.md.
//
// Which objects are events is as before: those directly in the top-level array, or directly in
// the value of a top-level "traceEvents" key (a device object, directly in "deviceProperties").
class TraceSax {
 public:
  explicit TraceSax(Builder& b) : b_(b) {}

  bool top_array() const noexcept { return top_ == Top::Array; }
  // The top-level object's last "traceEvents" is an array: a trace, if maybe an empty one.
  bool has_trace_events() const noexcept { return top_ == Top::Object && trace_events_array_; }

  bool null() { return value(nullptr); }
  bool boolean(bool v) { return value(v); }
  bool number_integer(json::number_integer_t v) { return value(v); }
  bool number_unsigned(json::number_unsigned_t v) { return value(v); }
  bool number_float(json::number_float_t v, const std::string& /*text*/) { return value(v); }
  bool string(std::string& v) { return value(std::move(v)); }
  bool binary(json::binary_t& /*v*/) { return value(nullptr); }  // never in JSON text
  bool start_object(std::size_t /*elements*/) { return open(true); }
  bool start_array(std::size_t /*elements*/) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& k) {
    if (frames_.empty()) return true;
    switch (frames_.back()) {
      case Role::Top:
        top_key_ = k == "traceEvents"        ? TopKey::TraceEvents
                   : k == "deviceProperties" ? TopKey::DeviceProperties
                                             : TopKey::Other;
        break;
      case Role::Event:
        event_key_ = k == "args" ? kArgsKey : event_field(k);
        if (event_key_ == kPh) f_.has_ph = true;
        break;
      case Role::Args:
        arg_key_ = arg_field(k);
        break;
      case Role::Capture:
        capture_key_ = std::move(k);
        break;
      case Role::EventList:
      case Role::DeviceList:
      case Role::Skip:
        break;
    }
    return true;
  }

  // The parser's own error (a parse_error with its byte, an out_of_range for a number too large),
  // thrown as it is.
  template <typename Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/, const Exception& e) {
    throw e;
  }

 private:
  enum class Role : std::uint8_t { Top, EventList, DeviceList, Event, Args, Capture, Skip };
  enum class Top : std::uint8_t { None, Object, Array };
  enum class TopKey : std::uint8_t { Other, TraceEvents, DeviceProperties };
  static constexpr int kArgsKey = kEventFields;  // the event's "args"

  // Where a value read now goes: a field of the event, or into the tree being captured; null
  // when it is skipped. Also notes what the top-level object's values are.
  json* slot() {
    if (frames_.empty()) return nullptr;
    switch (frames_.back()) {
      case Role::Top:
        if (top_ == Top::Object && top_key_ == TopKey::TraceEvents) trace_events_array_ = false;
        return nullptr;
      case Role::Event:
        if (event_key_ == kArgsKey) f_.clear_args();  // the last "args" is not an object
        return event_key_ >= 0 && event_key_ < kEventFields ? &f_.event[event_key_] : nullptr;
      case Role::Args:
        return arg_key_ >= 0 ? &f_.args[arg_key_] : nullptr;
      case Role::Capture: {
        json& parent = *captured_.back();
        if (parent.is_array()) {
          parent.push_back(nullptr);
          return &parent.back();
        }
        return &parent[capture_key_];
      }
      case Role::EventList:
      case Role::DeviceList:
      case Role::Skip:
        break;
    }
    return nullptr;
  }

  template <typename V>
  bool value(V&& v) {
    if (json* s = slot()) *s = json(std::forward<V>(v));
    return true;
  }

  void capture(json* into, bool object) {
    *into = object ? json::object() : json::array();
    captured_.push_back(into);
    frames_.push_back(Role::Capture);
  }

  bool open(bool object) {
    if (frames_.empty()) {
      top_ = object ? Top::Object : Top::Array;
      frames_.push_back(Role::Top);
      return true;
    }
    Role next = Role::Skip;
    switch (frames_.back()) {
      case Role::Top:
        if (top_ == Top::Array) {
          next = object ? Role::Event : Role::Skip;
        } else if (top_key_ == TopKey::TraceEvents) {
          trace_events_array_ = !object;
          next = Role::EventList;
        } else if (top_key_ == TopKey::DeviceProperties) {
          next = Role::DeviceList;
        }
        break;
      case Role::EventList:
        next = object ? Role::Event : Role::Skip;
        break;
      case Role::DeviceList:
        if (object) {
          device_capture_ = true;
          capture(&device_, true);
          return true;
        }
        break;
      case Role::Event:
        if (event_key_ == kArgsKey) {
          f_.clear_args();
          next = object ? Role::Args : Role::Skip;
        } else if (event_key_ >= 0) {
          capture(&f_.event[event_key_], object);
          return true;
        }
        break;
      case Role::Args:
        if (arg_key_ >= 0) {
          capture(&f_.args[arg_key_], object);
          return true;
        }
        break;
      case Role::Capture:
        capture(slot(), object);
        return true;
      case Role::Skip:
        break;
    }
    if (next == Role::Event) f_.clear();
    frames_.push_back(next);
    return true;
  }

  bool close() {
    const Role ended = frames_.back();
    frames_.pop_back();
    if (ended == Role::Event) {
      b_.event(f_);
    } else if (ended == Role::Capture) {
      captured_.pop_back();
      if (captured_.empty() && device_capture_) {
        device_capture_ = false;
        b_.device(device_);
        device_ = nullptr;
      }
    }
    return true;
  }

  Builder& b_;
  std::vector<Role> frames_;  // the containers open now, outermost first
  Top top_ = Top::None;
  TopKey top_key_ = TopKey::Other;
  bool trace_events_array_ = false;
  int event_key_ = -1;  // the event's field the next value is for (kArgsKey: args), -1: none
  int arg_key_ = -1;
  EventFields f_;
  std::vector<json*> captured_;  // the tree being captured: its open containers, outermost first
  std::string capture_key_;
  json device_;
  bool device_capture_ = false;
};

// The bytes of an InputFile one block at a time, as the iterator pair nlohmann's parser reads:
// an error reading the file (past the size limit, a damaged gzip stream) ends the input early
// and is kept, to be thrown instead of the parse error the early end causes.
class BlockIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  BlockIterator() = default;  // the end
  BlockIterator(detail::InputFile& in, std::exception_ptr& failure) : in_(&in), failure_(&failure) {
    next_block();
  }
  const char& operator*() const noexcept { return *at_; }
  BlockIterator& operator++() {
    if (++at_ == end_) next_block();
    return *this;
  }
  bool operator==(const BlockIterator& o) const noexcept { return at_ == o.at_; }
  bool operator!=(const BlockIterator& o) const noexcept { return at_ != o.at_; }

 private:
  void next_block() {
    std::string_view block;
    try {
      block = in_->read_block();
    } catch (...) {
      *failure_ = std::current_exception();
    }
    at_ = block.empty() ? nullptr : block.data();
    end_ = block.empty() ? nullptr : block.data() + block.size();
  }

  detail::InputFile* in_ = nullptr;
  std::exception_ptr* failure_ = nullptr;
  const char* at_ = nullptr;
  const char* end_ = nullptr;
};

// A JSON scanner for what profiler traces hold, exact where it goes: ASCII strings with the short
// escapes, integers of up to 18 digits, decimals read by strtod as nlohmann reads them, and
// nlohmann's grammar (no trailing comma, whitespace only after the value). Anything else (a \u
// escape, a byte past ASCII, a control character, a longer integer, a syntax error, a failed
// read) makes it give up, and the trace is read again by nlohmann's parser, which decides as it
// always did: events, values, errors and their bytes are the same either way. nlohmann's lexer
// copies every byte twice into its token buffers (~140 MB/s on the build host, half of
// `fathom analyze` on 2M kernels); this one reads a string with one test per byte.
class TraceScanner {
 public:
  // Reads in (block by block) or, with in null, text.
  TraceScanner(detail::InputFile* in, std::string_view text) noexcept
      : in_(in), at_(text.data()), end_(text.data() + text.size()) {}

  // False when it gave up; what sax was told then must be thrown away.
  bool parse(TraceSax& sax) {
    enum class Want { Value, ValueOrClose, Key, KeyOrClose, Colon, CommaOrClose };
    Want want = Want::Value;
    std::vector<char> open;  // '{' or '[' of each container open now
    for (;;) {
      const int c = next_token_char();
      if (failed_) return false;
      switch (want) {
        case Want::Colon:
          if (c != ':') return false;
          want = Want::Value;
          continue;
        case Want::CommaOrClose:
          if (open.empty()) return c == -1;
          if (c == ',') {
            want = open.back() == '{' ? Want::Key : Want::Value;
            continue;
          }
          if (c != (open.back() == '{' ? '}' : ']')) return false;
          close(sax, open);
          continue;
        case Want::KeyOrClose:
          if (c == '}') {
            close(sax, open);
            want = Want::CommaOrClose;
            continue;
          }
          [[fallthrough]];
        case Want::Key:
          if (c != '"' || !string()) return false;
          sax.key(text_);
          want = Want::Colon;
          continue;
        case Want::ValueOrClose:
          if (c == ']') {
            close(sax, open);
            want = Want::CommaOrClose;
            continue;
          }
          [[fallthrough]];
        case Want::Value:
          if (c == '{' || c == '[') {
            open.push_back(static_cast<char>(c));
            if (c == '{') {
              sax.start_object(std::size_t(-1));
              want = Want::KeyOrClose;
            } else {
              sax.start_array(std::size_t(-1));
              want = Want::ValueOrClose;
            }
            continue;
          }
          if (!value(sax, c)) return false;
          want = Want::CommaOrClose;
          continue;
      }
    }
  }

 private:
  static void close(TraceSax& sax, std::vector<char>& open) {
    const char kind = open.back();
    open.pop_back();
    if (kind == '{')
      sax.end_object();
    else
      sax.end_array();
  }

  // A scalar starting with c.
  bool value(TraceSax& sax, int c) {
    switch (c) {
      case '"':
        if (!string()) return false;
        sax.string(text_);
        return true;
      case 't':
        return literal("rue") && sax.boolean(true);
      case 'f':
        return literal("alse") && sax.boolean(false);
      case 'n':
        return literal("ull") && sax.null();
      default:
        return (c == '-' || (c >= '0' && c <= '9')) && number(sax, c);
    }
  }

  bool more() {
    if (!in_ || failed_) return false;
    try {
      const std::string_view block = in_->read_block();
      if (block.empty()) return false;
      at_ = block.data();
      end_ = block.data() + block.size();
      return true;
    } catch (...) {
      failed_ = true;  // nlohmann's pass meets the same failure and says it as it did
      return false;
    }
  }
  int get() {
    if (at_ == end_ && !more()) return -1;
    return static_cast<unsigned char>(*at_++);
  }
  int peek() {
    if (at_ == end_ && !more()) return -1;
    return static_cast<unsigned char>(*at_);
  }
  int next_token_char() {
    for (;;) {
      const int c = get();
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return c;
    }
  }

  bool literal(std::string_view rest) {
    for (char r : rest)
      if (get() != r) return false;
    return true;
  }

  // The string after its opening quote, into text_.
  bool string() {
    text_.clear();
    for (;;) {
      const char* from = at_;
      while (at_ != end_) {
        const auto c = static_cast<unsigned char>(*at_);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++at_;
      }
      text_.append(from, at_);
      if (at_ == end_) {
        if (!more()) return false;
        continue;
      }
      const char c = *at_++;
      if (c == '"') return true;
      if (c != '\\') return false;  // a control character or a byte past ASCII
      switch (get()) {
        case '"':
          text_ += '"';
          break;
        case '\\':
          text_ += '\\';
          break;
        case '/':
          text_ += '/';
          break;
        case 'b':
          text_ += '\b';
          break;
        case 'f':
          text_ += '\f';
          break;
        case 'n':
          text_ += '\n';
          break;
        case 'r':
          text_ += '\r';
          break;
        case 't':
          text_ += '\t';
          break;
        default:
          return false;  // \u (nlohmann checks its surrogates), or not an escape
      }
    }
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, as nlohmann delivers it: an integer as
  // number_unsigned (number_integer when negative), anything else as strtod's double.
  bool number(TraceSax& sax, int first) {
    number_.assign(1, static_cast<char>(first));
    for (int c = peek();
         c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' || (c >= '0' && c <= '9');
         c = peek()) {
      if (number_.size() >= 64) return false;
      number_ += static_cast<char>(c);
      ++at_;
    }
    if (failed_) return false;
    const std::string_view n = number_;
    std::size_t i = n[0] == '-' ? 1 : 0;
    const std::size_t int_start = i;
    while (i < n.size() && n[i] >= '0' && n[i] <= '9') ++i;
    const std::size_t int_digits = i - int_start;
    if (int_digits == 0 || (int_digits > 1 && n[int_start] == '0')) return false;
    bool decimal = false;
    if (i < n.size() && n[i] == '.') {
      decimal = true;
      const std::size_t from = ++i;
      while (i < n.size() && n[i] >= '0' && n[i] <= '9') ++i;
      if (i == from) return false;
    }
    if (i < n.size() && (n[i] == 'e' || n[i] == 'E')) {
      decimal = true;
      ++i;
      if (i < n.size() && (n[i] == '+' || n[i] == '-')) ++i;
      const std::size_t from = i;
      while (i < n.size() && n[i] >= '0' && n[i] <= '9') ++i;
      if (i == from) return false;
    }
    if (i != n.size()) return false;
    if (!decimal) {
      if (int_digits > 18) return false;  // nlohmann's strtoull / strtoll decide those
      std::uint64_t v = 0;
      for (std::size_t k = int_start; k < n.size(); ++k) v = v * 10 + (n[k] - '0');
      return n[0] == '-' ? sax.number_integer(-static_cast<std::int64_t>(v))
                         : sax.number_unsigned(v);
    }
    // strtod in the C locale's spelling, as nlohmann writes the token for it.
    const char point = *std::localeconv()->decimal_point;
    for (char& ch : number_)
      if (ch == '.') ch = point;
    char* stop = nullptr;
    const double d = std::strtod(number_.c_str(), &stop);
    if (stop != number_.c_str() + number_.size() || !std::isfinite(d)) return false;
    return sax.number_float(d, number_);
  }

  detail::InputFile* in_;
  const char* at_;
  const char* end_;
  bool failed_ = false;
  std::string text_;
  std::string number_;
};

// Parses the input into records; nullopt when parse (the scanner) gave up.
template <typename Parse>
std::optional<GpuActivity> parse_trace(const std::string& source_name, Parse&& parse,
                                       const std::exception_ptr* input_failure = nullptr) {
  Builder b;
  b.source = source_name;
  TraceSax sax(b);
  auto input_failed = [&] {
    if (input_failure && *input_failure) std::rethrow_exception(*input_failure);
  };
  try {
    if (!parse(sax)) return std::nullopt;
  } catch (const Error& e) {
    input_failed();
    // b.events counts the event being read.
    throw Error(fmt::format("{}: trace event {}: {}", source_name, b.events,
                            std::string(e.what()).substr(8)));
  } catch (const json::parse_error& e) {
    input_failed();
    throw Error(fmt::format("{} is not valid JSON at byte {} (truncated or corrupted?)",
                            source_name, e.byte));
  } catch (const json::exception& e) {
    input_failed();
    throw Error(fmt::format("{} could not be read as a trace: {}", source_name, e.what()));
  }
  input_failed();
  if (sax.top_array() ? b.events == 0 : !sax.has_trace_events()) {
    throw Error(
        fmt::format("{} is not a PyTorch profiler trace (no \"traceEvents\" array of trace events)",
                    source_name));
  }
  b.finish();
  return std::move(b.a);
}

}  // namespace

GpuActivity parse_kineto_trace(const std::string& text, const std::string& source_name) {
  if (auto a = parse_trace(source_name,
                           [&](TraceSax& sax) { return TraceScanner(nullptr, text).parse(sax); }))
    return std::move(*a);
  return *parse_trace(source_name, [&](TraceSax& sax) {
    json::sax_parse(text, &sax);  // false only from a handler that stops it: this one throws
    return true;
  });
}

GpuActivity read_kineto_trace(const std::string& path) {
  {
    detail::InputFile in(path, detail::kMaxInputBytes, detail::Content::Json);
    if (auto a = parse_trace(path, [&](TraceSax& sax) { return TraceScanner(&in, {}).parse(sax); }))
      return std::move(*a);
  }
  // The scanner gave up: nlohmann's parser reads the file again, from its start.
  detail::InputFile in(path, detail::kMaxInputBytes, detail::Content::Json);
  std::exception_ptr failure;
  return *parse_trace(
      path,
      [&](TraceSax& sax) {
        json::sax_parse(BlockIterator(in, failure), BlockIterator(), &sax);
        return true;
      },
      &failure);
}

}  // namespace fathom
