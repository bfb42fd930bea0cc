#pragma once
// The GPU section's JSON, for report_json.cpp and format_gpu_summary_json(). Internal: nlohmann
// stays out of the public headers.
#include <fathom/gpu_summary.h>
#include <fathom/report_writers.h>

#include <nlohmann/json.hpp>

namespace fathom::detail {

nlohmann::json gpu_summary_to_json(const GpuSummary& s);
// Throws nlohmann::json::exception or fathom::Error when a field is missing or wrong.
GpuSummary gpu_summary_from_json(const nlohmann::json& j);

}  // namespace fathom::detail
