#include <fathom/error.h>
#include <fathom/replay.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <unordered_map>

#include "records/annotation_roles.h"
#include "records/gz_file.h"
#include "records/json_number.h"

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

// The number at key, or fallback when there is none. Integers convert as Kineto means them (a
// stream 4294967295 is -1); a float that no integer of T holds is an error.
template <typename T>
T number(const json& args, const char* key, T fallback = 0) {
  auto it = args.find(key);
  if (it == args.end() || !it->is_number()) return fallback;
  if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_float()) return it->get<T>();
    try {
      return detail::json_integer<T>(*it);
    } catch (const Error& e) {
      throw Error(fmt::format("\"{}\": {}", key, std::string(e.what()).substr(8)));
    }
  } else {
    return it->get<T>();
  }
}

// Kernels and copies say "external id" in 2021 traces; ops always said "External id".
std::uint64_t external_id(const json& args) {
  auto v = number<std::int64_t>(args, "External id", -1);
  if (v < 0) v = number<std::int64_t>(args, "external id", 0);
  return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

std::uint64_t correlation(const json& args) {
  const auto v = number<std::int64_t>(args, "correlation", 0);
  return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

// tid is a number, a numeric string, or a label ("stream 7"): labels get a stable id.
std::uint64_t thread_of(const json& e) {
  auto it = e.find("tid");
  if (it == e.end()) return 0;
  if (it->is_number_integer()) return static_cast<std::uint64_t>(it->get<std::int64_t>());
  if (it->is_string()) {
    const auto s = it->get<std::string>();
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (!s.empty() && ec == std::errc() && end == s.data() + s.size()) return v;
    return std::hash<std::string>{}(s);  // a label, or digits too many for a number
  }
  return 0;
}

std::array<std::int32_t, 3> dim3(const json& args, const char* key) {
  std::array<std::int32_t, 3> d{0, 0, 0};
  auto it = args.find(key);
  if (it == args.end() || !it->is_array()) return d;
  for (std::size_t i = 0; i < 3 && i < it->size(); ++i)
    if ((*it)[i].is_number_float())
      d[i] = detail::json_integer<std::int32_t>((*it)[i]);
    else if ((*it)[i].is_number())
      d[i] = (*it)[i].get<std::int32_t>();
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

  void device(const json& d) {
    if (!d.is_object()) return;
    DeviceProperties p;
    p.id = number<std::int32_t>(d, "id");
    if (auto n = d.find("name"); n != d.end() && n->is_string()) p.name = n->get<std::string>();
    p.compute_major = number<int>(d, "computeMajor");
    p.compute_minor = number<int>(d, "computeMinor");
    p.total_memory_bytes = number<std::int64_t>(d, "totalGlobalMem");
    all_devices.push_back(std::move(p));
  }

  void event(const json& e) {
    if (!e.is_object()) return;
    auto ph = e.find("ph");
    if (ph == e.end()) return;
    ++events;
    if (!ph->is_string() || ph->get_ref<const std::string&>() != "X") return;
    auto cat = e.find("cat");
    auto ts = e.find("ts");
    if (cat == e.end() || !cat->is_string() || ts == e.end() || !ts->is_number()) return;
    const Category c = category_of(cat->get_ref<const std::string&>());
    if (c == Category::Skip) return;
    static const json kNoArgs = json::object();
    auto args_it = e.find("args");
    const json& args = args_it != e.end() && args_it->is_object() ? *args_it : kNoArgs;
    std::string name;
    if (auto n = e.find("name"); n != e.end() && n->is_string()) name = n->get<std::string>();
    const std::int64_t start = to_ns(ts->get<double>(), "ts");
    const std::int64_t dur = to_ns(std::max(0.0, number<double>(e, "dur")), "dur");
    if (dur > detail::kMaxTimeNs - start)
      throw Error(fmt::format("\"ts\" + \"dur\" ends past 2^62 ns (corrupted?)"));
    const std::int64_t end = start + dur;
    const auto device = number<std::int32_t>(args, "device", number<std::int32_t>(e, "pid"));

    switch (c) {
      case Category::Kernel: {
        KernelRecord k;
        k.name = std::move(name);
        k.device = device;
        k.stream = number<std::int32_t>(args, "stream");
        k.start_ns = start;
        k.end_ns = end;
        k.correlation_id = correlation(args);
        k.external_id = external_id(args);
        const auto g = dim3(args, "grid"), b = dim3(args, "block");
        k.grid_x = g[0], k.grid_y = g[1], k.grid_z = g[2];
        k.block_x = b[0], k.block_y = b[1], k.block_z = b[2];
        used_devices.insert(device);
        a.kernels.push_back(std::move(k));
        break;
      }
      case Category::Memcpy: {
        MemcpyRecord m;
        parse_copy_name(name, m);
        m.bytes = number<std::int64_t>(args, "bytes");
        m.device = device;
        m.stream = number<std::int32_t>(args, "stream");
        m.start_ns = start;
        m.end_ns = end;
        m.correlation_id = correlation(args);
        m.external_id = external_id(args);
        used_devices.insert(device);
        a.memcpys.push_back(m);
        break;
      }
      case Category::Memset: {
        MemsetRecord m;
        m.bytes = number<std::int64_t>(args, "bytes");
        m.device = device;
        m.stream = number<std::int32_t>(args, "stream");
        m.start_ns = start;
        m.end_ns = end;
        m.correlation_id = correlation(args);
        m.external_id = external_id(args);
        used_devices.insert(device);
        a.memsets.push_back(m);
        break;
      }
      case Category::Sync: {
        SyncRecord s;
        if (auto k = args.find("cuda_sync_kind"); k != args.end() && k->is_string())
          s.kind = sync_kind(k->get_ref<const std::string&>());
        else
          s.kind = sync_kind(name);
        s.stream = number<std::int32_t>(args, "stream", -1);
        s.start_ns = start;
        s.end_ns = end;
        s.correlation_id = correlation(args);
        s.external_id = external_id(args);
        a.syncs.push_back(s);
        break;
      }
      case Category::Runtime: {
        RuntimeCallRecord r;
        r.name = std::move(name);
        r.thread = thread_of(e);
        r.start_ns = start;
        r.end_ns = end;
        r.correlation_id = correlation(args);
        r.external_id = external_id(args);
        a.runtime_calls.push_back(std::move(r));
        break;
      }
      case Category::Annotation:
        a.annotations.push_back(classified_annotation(std::move(name), thread_of(e), start, end));
        break;
      case Category::Op:
        op(e, args, std::move(name), start, end);
        break;
      case Category::Skip:
        break;
    }
  }

  void op(const json& e, const json& args, std::string name, std::int64_t start, std::int64_t end) {
    // record_function scopes (ProfilerStep#N, the DataLoader, optimizers) were Operators in 2021.
    const AnnotationMeaning m = annotation_meaning(name);
    if (m.role != AnnotationRole::None) {
      a.annotations.push_back(AnnotationRecord{name, thread_of(e), start, end, m.role, m.phase});
      // Autograd's nodes and their evaluate_function wrappers are both: the backward phase, and
      // ops (MmBackward0 can be the op a kernel's external id names).
      if (m.phase != Phase::Backward) return;
    }
    OpRecord o;
    o.name = std::move(name);
    o.sequence_nr = number<std::int64_t>(args, "Sequence number", -1);
    o.thread = thread_of(e);
    o.start_ns = start;
    o.end_ns = end;
    o.external_id = external_id(args);
    if (auto dims = args.find("Input Dims"); dims != args.end() && dims->is_array()) {
      for (const json& d : *dims) {
        std::vector<std::int64_t> shape;
        // A tensor's sizes; anything else (a scalar, a TensorList) is recorded as no shape.
        if (d.is_array() &&
            std::all_of(d.begin(), d.end(), [](const json& x) { return x.is_number_integer(); }))
          for (const json& x : d) shape.push_back(x.get<std::int64_t>());
        o.input_shapes.push_back(std::move(shape));
      }
    }
    if (auto types = args.find("Input type"); types != args.end() && types->is_array())
      for (const json& t : *types)
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

}  // namespace

GpuActivity parse_kineto_trace(const std::string& text, const std::string& source_name) {
  Builder b;
  b.source = source_name;
  bool top_array = false;
  std::string top_key;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    if (depth == 0 && event == json::parse_event_t::array_start) top_array = true;
    if (depth == 1 && event == json::parse_event_t::key) top_key = parsed.get<std::string>();
    if (event != json::parse_event_t::object_end) return true;
    // Each event is read as soon as it is parsed and then dropped: memory holds the text and the
    // records, never the whole document.
    if (top_array && depth == 1) {
      b.event(parsed);
      return false;
    }
    if (!top_array && depth == 2 && top_key == "traceEvents") {
      b.event(parsed);
      return false;
    }
    if (!top_array && depth == 2 && top_key == "deviceProperties") {
      b.device(parsed);
      return false;
    }
    return true;
  };
  json top;
  try {
    top = json::parse(text, callback);
  } catch (const Error& e) {
    // b.events counts the event being read.
    throw Error(fmt::format("{}: trace event {}: {}", source_name, b.events,
                            std::string(e.what()).substr(8)));
  } catch (const json::parse_error& e) {
    throw Error(fmt::format("{} is not valid JSON at byte {} (truncated or corrupted?)",
                            source_name, e.byte));
  } catch (const json::exception& e) {
    throw Error(fmt::format("{} could not be read as a trace: {}", source_name, e.what()));
  }
  if (top_array
          ? b.events == 0
          : !(top.is_object() && top.contains("traceEvents") && top["traceEvents"].is_array())) {
    throw Error(
        fmt::format("{} is not a PyTorch profiler trace (no \"traceEvents\" array of trace events)",
                    source_name));
  }
  b.finish();
  return std::move(b.a);
}

GpuActivity read_kineto_trace(const std::string& path) {
  detail::InputFile in(path, detail::kMaxInputBytes, detail::Content::Json);
  return parse_kineto_trace(in.read_all(), path);
}

}  // namespace fathom
