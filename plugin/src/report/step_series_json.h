#pragma once
// The epoch's "series" object (step_series.h): at most thresholds::kStepSeriesReported points
// (evenly thinned when the epoch kept more), the change point and the memory creep.
#include <fathom/step_series.h>

#include <nlohmann/json.hpp>
#include <optional>

namespace fathom::detail {

nlohmann::json step_series_json(const std::optional<StepSeries>& s);
std::optional<StepSeries> step_series_from(const nlohmann::json& epoch);

}  // namespace fathom::detail
