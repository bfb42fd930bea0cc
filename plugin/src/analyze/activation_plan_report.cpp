#include "analyze/activation_plan_report.h"

#include <fathom/checkpoint_planner.h>
#include <fathom/error.h>
#include <fathom/module_report.h>
#include <fmt/format.h>

namespace fathom {

ActivationPlanReport activation_plan_report(const std::string& chain,
                                            const std::vector<ActivationUnit>& units,
                                            const ActivationPlan& plan,
                                            const ActivationPlanOptions& options) {
  const ActivationCost& c = plan.cost;
  if (c.units.size() != units.size() || plan.assignment.choices.size() != units.size())
    throw Error(fmt::format(
        "activation plan report: the plan has {} units, the chain {}; report the plan with the "
        "units it was made for",
        c.units.size(), units.size()));
  ActivationPlanReport r;
  r.chain = chain;
  r.budget_bytes = plan.budget_bytes;
  r.unconstrained_peak_bytes = plan.unconstrained_peak_bytes;
  r.min_feasible_budget_bytes = plan.min_feasible_budget_bytes;
  r.predicted_peak_bytes = c.peak_bytes;
  r.predicted_stored_bytes = c.stored_bytes;
  r.forward_ms = plan.forward_ms;
  r.predicted_recompute_ms = c.recompute_ms;
  r.predicted_transfer_ms = c.exposed_transfer_ms;
  if (plan.forward_flops > 0) r.recompute_flop_fraction = c.recompute_flops / plan.forward_flops;
  r.link_bytes_per_second = options.link_bytes_per_second;
  r.feasible = plan.feasible;
  r.exact = plan.exact;
  r.message = plan.message;
  for (std::size_t i = 0; i < units.size(); ++i) {
    const UnitActivationCost& u = c.units[i];
    ActivationModuleRow row;
    row.name = units[i].name;
    row.kept_bytes = u.kept_bytes;
    row.recomputed_bytes = u.recomputed_bytes;
    row.offloaded_bytes = u.offloaded_bytes;
    const auto& choices = plan.assignment.choices[i];
    for (std::size_t g = 0; g < choices.size() && g < units[i].groups.size(); ++g) {
      if (choices[g] == TensorChoice::Recompute) row.recomputed.push_back(units[i].groups[g].name);
      if (choices[g] == TensorChoice::Offload) row.offloaded.push_back(units[i].groups[g].name);
    }
    if (plan.assignment.input(i) == TensorChoice::Offload) row.offloaded.push_back("input");
    row.predicted_peak_bytes = u.peak_bytes;
    row.predicted_extra_ms = u.extra_ms();
    r.modules.push_back(std::move(row));
  }
  return r;
}

}  // namespace fathom
