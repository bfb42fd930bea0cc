#pragma once
// The per-module section (module_report.h) in the report writers (report_json.cpp,
// report_terminal.cpp). Internal to the core: nlohmann stays out of the public headers.
#include <fathom/report.h>

#include <string>

#include "base/json_fields.h"

namespace fathom::detail {

// The epoch's "modules" object, both directions (json_fields.h).
void fields(JsonWriter& v, ModuleReport& m);
void fields(JsonReader& v, ModuleReport& m);

// The terminal section; nothing when the epoch has no per-module measurements.
void module_report_section(std::string& out, const EpochSummary& e);

}  // namespace fathom::detail
