#pragma once
// Optional values as null for the writers that are not a model type's description (derived
// sections, write-only documents: json_fields.h describes the model). Internal to fathom::core;
// templated on the JSON type because the job report keeps its keys in order (ordered_json).
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

}  // namespace fathom::detail
