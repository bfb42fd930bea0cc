#pragma once
// The GPU section's JSON, for report_json.cpp and format_gpu_summary_json(). Internal: nlohmann
// stays out of the public headers.
#include <fathom/gpu_summary.h>
#include <fathom/report_writers.h>

#include "base/json_fields.h"

namespace fathom::detail {

// The GPU section, both directions (json_fields.h). Reading throws nlohmann::json::exception or
// fathom::Error when a field is missing or wrong.
void fields(JsonWriter& v, GpuSummary& s);
void fields(JsonReader& v, GpuSummary& s);

}  // namespace fathom::detail
