#pragma once
// The joint activation plans of the per-module section (ModuleReport::activation_plans) in the
// JSON and terminal writers, called from module_report_writers.cpp. Internal to the core.
#include <fathom/module_report.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fathom::detail {

nlohmann::json activation_plans_json(const std::vector<ActivationPlanReport>& plans);
// Reads modules["activation_plans"]; empty when absent (reports written before it existed).
std::vector<ActivationPlanReport> activation_plans_from(const nlohmann::json& modules);

// Each plan: its line, predicted against measured peak and time, and the per-module table.
void activation_plans_section(std::string& out, const std::vector<ActivationPlanReport>& plans);

}  // namespace fathom::detail
