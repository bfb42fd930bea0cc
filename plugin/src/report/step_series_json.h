#pragma once
// The epoch's "series" object (step_series.h): at most thresholds::kStepSeriesReported points
// (evenly thinned when the epoch kept more), the change point and the memory creep.
#include <fathom/step_series.h>

#include "base/json_fields.h"

namespace fathom::detail {

void fields(JsonWriter& v, StepSeries& s);
void fields(JsonReader& v, StepSeries& s);
// What the report writes of a series: at most thresholds::kStepSeriesReported points, every
// n-th of those the epoch kept, and the stride that says so.
StepSeries reported_series(const StepSeries& s);

}  // namespace fathom::detail
