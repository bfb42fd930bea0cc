#pragma once
// What every JSON writer of the report needs: optional fields as null, and findings in one shape
// (the run report and the job report print them alike). Internal to fathom::core; templated on
// the JSON type because the job report keeps its keys in order (nlohmann::ordered_json).
#include <fathom/error.h>
#include <fathom/report.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>

#include "base/json_number.h"

namespace fathom::detail {

template <typename Json = nlohmann::json, typename T>
Json optional_json(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

// The value at key, or nullopt when the key is absent or null.
template <typename T, typename Json>
std::optional<T> optional_from(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return json_integer<T>(*it);
  else
    return it->template get<T>();
}

template <typename Json = nlohmann::json>
Json finding_json(const Finding& f) {
  Json evidence = Json::array();
  for (const auto& ev : f.evidence) evidence.push_back({{"name", ev.name}, {"value", ev.value}});
  return {{"id", f.id},
          {"severity", std::string(severity_name(f.severity))},
          {"title", f.title},
          {"evidence", evidence},
          {"why", f.why},
          {"estimated_gain", f.estimated_gain},
          {"gain_fraction", optional_json<Json>(f.gain_fraction)},
          {"fix", f.fix},
          {"applied", f.applied}};
}

inline Severity severity_from(const std::string& s) {
  for (Severity v : {Severity::Info, Severity::Warning, Severity::Critical}) {
    if (severity_name(v) == s) return v;
  }
  throw Error("unknown severity '" + s + "'");
}

template <typename Json>
Finding finding_from(const Json& fj) {
  Finding f;
  f.id = fj.at("id").template get<std::string>();
  f.severity = severity_from(fj.at("severity").template get<std::string>());
  f.title = fj.at("title").template get<std::string>();
  for (const auto& ev : fj.at("evidence"))
    f.evidence.push_back(
        {ev.at("name").template get<std::string>(), ev.at("value").template get<std::string>()});
  f.why = fj.at("why").template get<std::string>();
  f.estimated_gain = fj.at("estimated_gain").template get<std::string>();
  f.gain_fraction = optional_from<double>(fj, "gain_fraction");
  f.fix = fj.at("fix").template get<std::string>();
  f.applied = fj.at("applied").template get<bool>();
  return f;
}

// {"id": "device_memory", "what": ..., "why": ...}.
template <typename Json = nlohmann::json>
Json unmeasured_json(const Unmeasured& u) {
  return {{"id", std::string(unmeasured_id_name(u.id))}, {"what", u.what}, {"why", u.why}};
}

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

template <typename Json>
Unmeasured unmeasured_from(const Json& j) {
  Unmeasured u{j.at("what").template get<std::string>(), j.at("why").template get<std::string>()};
  if (auto id = optional_from<std::string>(j, "id"))
    u.id = unmeasured_id_from_name(*id).value_or(UnmeasuredId::Other);
  else
    u.id = legacy_unmeasured_id(u.what);
  return u;
}

}  // namespace fathom::detail
