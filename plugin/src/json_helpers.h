#pragma once
// What every JSON writer of the report needs: optional fields as null, and findings in one shape
// (the run report and the job report print them alike). Internal to fathom::core; templated on
// the JSON type because the job report keeps its keys in order (nlohmann::ordered_json).
#include <fathom/report.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

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

}  // namespace fathom::detail
