#pragma once
// The mixed-precision section in the report writers (report_json.cpp, report_terminal.cpp).
// Internal to the core: nlohmann stays out of the public headers.
#include <fathom/report.h>

#include <string>

#include "base/json_fields.h"

namespace fathom::detail {

// The epoch's "mixed_precision" object, both directions (json_fields.h).
void fields(JsonWriter& v, MixedPrecisionSummary& m);
void fields(JsonReader& v, MixedPrecisionSummary& m);

// The terminal section; nothing when the epoch has no mixed-precision summary.
void mixed_precision_section(std::string& out, const EpochSummary& e);

}  // namespace fathom::detail
