#pragma once
// Turns an epoch's measurements into findings: evidence, why it matters, estimated gain, fix.
// Every threshold lives in thresholds.h.
#include <vector>

#include <fathom/report.h>

namespace fathom {

// Findings for one epoch, most severe and largest gain first. Options decide whether fixes are
// listed (Suggest, Auto) at all.
std::vector<Finding> advise(const EpochSummary& epoch, const Environment& env);

}  // namespace fathom
