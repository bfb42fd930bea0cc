#pragma once
// The epoch's "flops" and "energy" objects (achievement.h), written and read back. Absent or
// null in a report: not counted.
#include <fathom/achievement.h>

#include <nlohmann/json.hpp>
#include <optional>

namespace fathom::detail {

nlohmann::json flops_json(const std::optional<FlopsSummary>& f);
std::optional<FlopsSummary> flops_from(const nlohmann::json& epoch);
nlohmann::json energy_json(const std::optional<EnergySummary>& e);
std::optional<EnergySummary> energy_from(const nlohmann::json& epoch);

}  // namespace fathom::detail
