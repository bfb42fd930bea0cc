#pragma once
// The per-module section (module_report.h) in the report writers (report_json.cpp,
// report_terminal.cpp). Internal to the core: nlohmann stays out of the public headers.
#include <fathom/report.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace fathom::detail {

nlohmann::json module_report_json(const std::optional<ModuleReport>& m);
// Reads epoch["modules"]; nullopt when absent or null. Throws nlohmann's exceptions on a malformed
// section (parse_json_report turns them into fathom::Error).
std::optional<ModuleReport> module_report_from(const nlohmann::json& epoch);

// The terminal section; nothing when the epoch has no per-module measurements.
void module_report_section(std::string& out, const EpochSummary& e);

}  // namespace fathom::detail
