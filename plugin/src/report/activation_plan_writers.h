#pragma once
// The joint activation plans of the per-module section (ModuleReport::activation_plans) in the
// terminal writer, called from module_report_writers.cpp (which holds the JSON of the whole
// section). Internal to the core.
#include <fathom/module_report.h>

#include <string>
#include <vector>

namespace fathom::detail {

// Each plan: its line, predicted against measured peak and time, and the per-module table.
void activation_plans_section(std::string& out, const std::vector<ActivationPlanReport>& plans);

}  // namespace fathom::detail
