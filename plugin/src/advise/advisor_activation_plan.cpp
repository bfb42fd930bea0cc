// The joint activation plans (keep, recompute or offload each saved tensor) in the epoch's
// per-module section: one finding per plan, suggested or applied by Auto, whose fix is the plan
// with its predicted memory and time.
#include <fathom/checkpoint_planner.h>
#include <fmt/format.h>

#include <algorithm>

#include "advise/advisor_rules.h"
#include "base/bytes_text.h"

namespace fathom::advice {
namespace {

using detail::bytes_text;

// The modules a fix names one by one; the rest are counted.
constexpr std::size_t kModulesInFix = 12;

std::string ms_text(double ms) {
  return fmt::format(fmt::runtime(ms < 10 ? "{:.3f} ms" : "{:.1f} ms"), ms);
}

std::string names_text(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::string activation_plan_fix(const ActivationPlanReport& p) {
  std::string s = fmt::format(
      "// activation plan for {}: predicted peak {} (budget {}, {} with everything kept), extra "
      "{} a step (recompute {}, exposed transfer {})\n",
      p.chain, bytes_text(p.predicted_peak_bytes), bytes_text(p.budget_bytes),
      bytes_text(p.unconstrained_peak_bytes), ms_text(p.predicted_extra_ms()),
      ms_text(p.predicted_recompute_ms), ms_text(p.predicted_transfer_ms));
  std::size_t named = 0, more = 0;
  for (const ActivationModuleRow& m : p.modules) {
    if (m.recomputed.empty() && m.offloaded.empty()) continue;
    if (named == kModulesInFix) {
      ++more;
      continue;
    }
    ++named;
    s += "//   " + m.name + ":";
    if (!m.recomputed.empty()) s += " recompute " + names_text(m.recomputed);
    if (!m.offloaded.empty())
      s += std::string(m.recomputed.empty() ? "" : ";") + " offload " + names_text(m.offloaded);
    s += "\n";
  }
  if (more > 0) s += fmt::format("//   ... and {} more module{}\n", more, more == 1 ? "" : "s");
  if (p.link_bytes_per_second <= 0)
    s += "// nothing offloaded: the host link's bandwidth was not measured\n";
  s += p.code.empty() ? "// let fathom apply it: FATHOM_MODE=auto" : p.code;
  return s;
}

void activation_plans(const EpochSummary& e, std::vector<Finding>& out) {
  if (!e.modules) return;
  for (const ActivationPlanReport& p : e.modules->activation_plans) {
    Finding f = make_finding(
        finding_id::kActivationPlan, p.feasible ? Severity::Warning : Severity::Critical,
        (p.applied ? "fathom keeps, recomputes or offloads the saved activations of "
                   : "Keep, recompute or offload the saved activations of ") +
            p.chain);
    f.evidence = {
        {"activation peak with everything kept", bytes_text(p.unconstrained_peak_bytes)},
        {"activation budget", bytes_text(p.budget_bytes) + " (" + p.budget + ")"},
        {"predicted activation peak",
         bytes_text(p.predicted_peak_bytes) +
             (p.measured_peak_bytes ? ", " + bytes_text(*p.measured_peak_bytes) + " measured"
                                    : "")},
        {"extra per step",
         ms_text(p.predicted_extra_ms()) + " predicted (recompute " +
             ms_text(p.predicted_recompute_ms) + ", exposed transfer " +
             ms_text(p.predicted_transfer_ms) + ")" +
             (p.measured_extra_ms ? ", " + ms_text(*p.measured_extra_ms) + " measured" : "")},
        {"host link", p.link_bytes_per_second > 0
                          ? fmt::format("{:.1f} GB/s each way", p.link_bytes_per_second / 1e9)
                          : "not measured: nothing offloaded"}};
    if (p.recompute_flop_fraction)
      f.evidence.push_back({"recomputed FLOPs", fmt::format("{:.0f}% of the forward's",
                                                            100 * *p.recompute_flop_fraction)});
    if (!p.feasible)
      f.evidence.push_back({"least budget any plan fits", bytes_text(p.min_feasible_budget_bytes)});
    f.why =
        p.message +
        ". Recomputing the cheap ops (pointwise, norms) and keeping the expensive ones' outputs "
        "(matmul, convolution, attention), or copying saved tensors to host memory while the "
        "next module computes, saves activation memory for less time than recomputing whole "
        "blocks.";
    f.estimated_gain =
        bytes_text(std::max<std::int64_t>(0, p.unconstrained_peak_bytes - p.predicted_peak_bytes)) +
        " less activation memory for " + ms_text(p.predicted_extra_ms()) + " a step";
    f.fix = activation_plan_fix(p);
    f.applied = p.applied;
    out.push_back(std::move(f));
  }
}

}  // namespace fathom::advice
