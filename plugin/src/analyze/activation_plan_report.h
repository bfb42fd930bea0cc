#pragma once
// An activation plan as the report shows it (module_report.h's ActivationPlanReport).
#include <fathom/activation_plan.h>
#include <fathom/module_report.h>

#include <string>
#include <vector>

namespace fathom {

// The report's view of a plan of `units` (named as they are). Measured fields stay null and
// budget text, applied and code empty for the caller to fill.
ActivationPlanReport activation_plan_report(const std::string& chain,
                                            const std::vector<ActivationUnit>& units,
                                            const ActivationPlan& plan,
                                            const ActivationPlanOptions& options = {});

}  // namespace fathom
