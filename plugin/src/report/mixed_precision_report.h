#pragma once
// The mixed-precision section in the report writers (report_json.cpp, report_terminal.cpp).
// Internal to the core: nlohmann stays out of the public headers.
#include <fathom/report.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace fathom::detail {

nlohmann::json mixed_precision_json(const std::optional<MixedPrecisionSummary>& m);
// Reads epoch["mixed_precision"]; nullopt when absent or null. Throws nlohmann's exceptions on a
// malformed section (parse_json_report turns them into fathom::Error).
std::optional<MixedPrecisionSummary> mixed_precision_from(const nlohmann::json& epoch);

// The terminal section; nothing when the epoch has no mixed-precision summary.
void mixed_precision_section(std::string& out, const EpochSummary& e);

}  // namespace fathom::detail
