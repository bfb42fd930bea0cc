#pragma once
// The epoch's "flops" and "energy" objects (achievement.h), written and read back. Absent or
// null in a report: not counted.
#include <fathom/achievement.h>

#include "base/json_fields.h"

namespace fathom::detail {

void fields(JsonWriter& v, FlopsSummary& f);
void fields(JsonReader& v, FlopsSummary& f);
void fields(JsonWriter& v, EnergySummary& e);
void fields(JsonReader& v, EnergySummary& e);

}  // namespace fathom::detail
