#pragma once
// One description of a type's JSON fields for both directions, so that a key cannot be written
// under one name and read under another. A type describes itself with
//
//   template <typename V> static void fields(V& v, PhaseTensorCores& p) {
//     v("phase", p.phase);                  // required: a missing key is an error
//     v.since("unknown_ns", p.unknown_ns);  // added later: older files keep the default
//   }
//
// in namespace fathom::detail, not an anonymous one: the visitors find it by argument-dependent
// lookup through their own namespace, which does not see into anonymous namespaces. `static`
// keeps each description in the one file that writes its type; a type other files write too
// (an epoch's sections) is declared in its file's header as
//   void fields(JsonWriter& v, T& t);  void fields(JsonReader& v, T& t);
// and defined there from the template. The model types every writer shares (findings, what was
// not measured, devices, the records' enums) are described here.
// JsonWriter fills an object, JsonReader reads one; nested described types, vectors and
// optionals recurse. A type with its own conversion (an enum's names, a legacy format)
// specializes JsonCodec, once in the program (two files with two codecs for one type would break
// the one-definition rule). Internal: nlohmann stays out of the public headers.
#include <fathom/error.h>
#include <fathom/gpu_records.h>
#include <fathom/phase.h>
#include <fathom/report.h>
#include <fathom/unmeasured.h>
#include <fmt/format.h>

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "base/json_number.h"

namespace fathom::detail {

// Specialize with `static nlohmann::json write(const T&)` and
// `static void read(const nlohmann::json&, T&)`.
template <typename T>
struct JsonCodec {};

template <typename T>
concept HasJsonCodec = requires(const T& t) {
  JsonCodec<T>::write(t);
};

template <typename T>
inline constexpr bool kJsonScalar = std::is_arithmetic_v<T> || std::is_same_v<T, std::string>;

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

// A phase as its name ("forward"); another name is an error that says it.
template <>
struct JsonCodec<Phase> {
  static nlohmann::json write(Phase p) { return std::string(phase_name(p)); }
  static void read(const nlohmann::json& j, Phase& p) {
    const auto name = j.get<std::string>();
    const auto phase = phase_from_name(name);
    if (!phase) throw Error(fmt::format("unknown phase '{}'", name));
    p = *phase;
  }
};

template <typename T, typename Json = nlohmann::json>
Json write_json(const T& t);
template <typename T>
void read_json(const nlohmann::json& j, T& t);

// Json: nlohmann::json (keys sorted, as the report prints them) or nlohmann::ordered_json (the
// job report keeps its keys in the order written).
template <typename Json>
class BasicJsonWriter {
 public:
  // For the few fields a direction handles apart (a derived value written, a legacy form read).
  static constexpr bool writing = true;

  // Every call returns true ("the field is there"), so that a description can branch on since().
  template <typename T>
  bool operator()(const char* key, const T& v) {
    out_[key] = write_json<T, Json>(v);
    return true;
  }
  template <typename T>
  bool since(const char* key, const T& v) {
    return (*this)(key, v);
  }
  // A section that is null when it was not measured, rather than a row of zeros.
  template <typename T>
  void null_unless(bool measured, const char* key, const T& v) {
    out_[key] = measured ? write_json<T, Json>(v) : Json(nullptr);
  }

  Json take() && { return std::move(out_); }

 private:
  Json out_ = Json::object();
};
using JsonWriter = BasicJsonWriter<nlohmann::json>;

class JsonReader {
 public:
  static constexpr bool writing = false;
  explicit JsonReader(const nlohmann::json& j) : j_(j) {}
  // The object being read, for a legacy form a field's own reading cannot see.
  const nlohmann::json& object() const noexcept { return j_; }

  template <typename T>
  bool operator()(const char* key, T& v) {
    read_json(j_.at(key), v);
    return true;
  }
  // Absent keeps the default and returns false; so does a null scalar or enum (older writers put
  // null for "not there"). Anything else reads a null as it would any value (an optional empties,
  // a nested object must be one).
  template <typename T>
  bool since(const char* key, T& v) {
    auto it = j_.find(key);
    if (it == j_.end()) return false;
    if (it->is_null() && (kJsonScalar<T> || std::is_enum_v<T>)) return false;
    read_json(*it, v);
    return true;
  }
  // The key is required; null keeps the default.
  template <typename T>
  void null_unless(bool /*measured*/, const char* key, T& v) {
    if (const nlohmann::json& x = j_.at(key); !x.is_null()) read_json(x, v);
  }

 private:
  const nlohmann::json& j_;
};

template <typename T, typename Json>
Json write_json(const T& t) {
  if constexpr (HasJsonCodec<T>) {
    return Json(JsonCodec<T>::write(t));
  } else if constexpr (kJsonScalar<T>) {
    return Json(t);
  } else if constexpr (IsOptional<T>::value) {
    return t ? write_json<typename T::value_type, Json>(*t) : Json(nullptr);
  } else if constexpr (IsVector<T>::value) {
    Json out = Json::array();
    for (const auto& e : t) out.push_back(write_json<typename T::value_type, Json>(e));
    return out;
  } else {
    BasicJsonWriter<Json> w;
    fields(w, const_cast<T&>(t));  // one description for both directions; the writer only reads
    return std::move(w).take();
  }
}

template <typename T>
void read_json(const nlohmann::json& j, T& t) {
  if constexpr (HasJsonCodec<T>) {
    JsonCodec<T>::read(j, t);
  } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    t = json_integer<T>(j);  // out of the field's range is an error, not a wrap
  } else if constexpr (kJsonScalar<T>) {
    j.get_to(t);
  } else if constexpr (IsOptional<T>::value) {
    if (j.is_null()) {
      t = std::nullopt;
    } else {
      typename T::value_type v{};
      read_json(j, v);
      t = std::move(v);
    }
  } else if constexpr (IsVector<T>::value) {
    for (const nlohmann::json& e : j) {  // as nlohmann iterates: null is empty
      typename T::value_type v{};
      read_json(e, v);
      t.push_back(std::move(v));
    }
  } else {
    JsonReader r(j);
    fields(r, t);
  }
}

template <typename T>
T read_json(const nlohmann::json& j) {
  T t{};
  read_json(j, t);
  return t;
}

// An enum read back from its name: the one of `all` that `name` gives the text, else an error that
// names `what` and the text.
template <typename E, typename Name>
E enum_from_name(const nlohmann::json& j, std::initializer_list<E> all, Name name,
                 const char* what) {
  const auto text = j.get<std::string>();
  for (E e : all)
    if (name(e) == text) return e;
  throw Error(fmt::format("unknown {} '{}'", what, text));
}

// --- the records' enums and devices, which the trace files and the GPU section both write
// ---------

template <>
struct JsonCodec<MemcpyKind> {
  static nlohmann::json write(MemcpyKind k) { return std::string(memcpy_kind_name(k)); }
  static void read(const nlohmann::json& j, MemcpyKind& k) {
    k = enum_from_name(j,
                       {MemcpyKind::Unknown, MemcpyKind::HostToDevice, MemcpyKind::DeviceToHost,
                        MemcpyKind::DeviceToDevice, MemcpyKind::HostToHost, MemcpyKind::PeerToPeer},
                       memcpy_kind_name, "copy direction");
  }
};

template <>
struct JsonCodec<MemoryKind> {
  static nlohmann::json write(MemoryKind k) { return std::string(memory_kind_name(k)); }
  static void read(const nlohmann::json& j, MemoryKind& k) {
    k = enum_from_name(j,
                       {MemoryKind::Unknown, MemoryKind::Pageable, MemoryKind::Pinned,
                        MemoryKind::Device, MemoryKind::Managed},
                       memory_kind_name, "memory kind");
  }
};

template <typename V>
void fields(V& v, DeviceProperties& d) {
  v("id", d.id);
  v("name", d.name);
  v("compute_major", d.compute_major);
  v("compute_minor", d.compute_minor);
  v("total_memory_bytes", d.total_memory_bytes);
}

// --- what every section shares: findings and what was not measured -----------------------------

template <>
struct JsonCodec<Severity> {
  static nlohmann::json write(Severity s) { return std::string(severity_name(s)); }
  static void read(const nlohmann::json& j, Severity& s) {
    s = enum_from_name(j, {Severity::Info, Severity::Warning, Severity::Critical}, severity_name,
                       "severity");
  }
};

// An id this fathom does not know (a newer writer's) reads as Other.
template <>
struct JsonCodec<UnmeasuredId> {
  static nlohmann::json write(UnmeasuredId id) { return std::string(unmeasured_id_name(id)); }
  static void read(const nlohmann::json& j, UnmeasuredId& id) {
    id = unmeasured_id_from_name(j.get<std::string>()).value_or(UnmeasuredId::Other);
  }
};

// A report written before entries had ids (schema 1 without "id") gets them here, once, from the
// words its writer used; everything after reading uses the id.
inline UnmeasuredId legacy_unmeasured_id(const std::string& what) {
  auto has = [&](const char* s) { return what.find(s) != std::string::npos; };
  if (has("CUPTI")) return UnmeasuredId::GpuActivity;
  if (has("NVML")) return UnmeasuredId::DeviceTelemetry;
  if (has("device memory")) return UnmeasuredId::DeviceMemory;
  if (has("activation bytes")) return UnmeasuredId::ActivationBytes;
  if (has("optimizer state")) return UnmeasuredId::OptimizerState;
  if (has("ATen op ranges")) return UnmeasuredId::OpRanges;
  return UnmeasuredId::Other;
}

// {"id": "device_memory", "what": ..., "why": ...}: the words first, which an entry without an id
// (absent or null) gets its id from.
template <typename V>
void fields(V& v, Unmeasured& u) {
  v("what", u.what);
  v("why", u.why);
  const bool has_id = v.since("id", u.id);
  if constexpr (!V::writing)
    if (!has_id) u.id = legacy_unmeasured_id(u.what);
}

template <typename V>
void fields(V& v, Evidence& e) {
  v("name", e.name);
  v("value", e.value);
}

template <typename V>
void fields(V& v, Finding& f) {
  v("id", f.id);
  v("severity", f.severity);
  v("title", f.title);
  v("evidence", f.evidence);
  v("why", f.why);
  v("estimated_gain", f.estimated_gain);
  v.since("gain_fraction", f.gain_fraction);
  v("fix", f.fix);
  v("applied", f.applied);
}

}  // namespace fathom::detail
