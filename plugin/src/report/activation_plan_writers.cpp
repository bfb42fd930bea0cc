#include "report/activation_plan_writers.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "base/bytes_text.h"

namespace fathom::detail {
namespace {

std::string names_text(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::string optional_bytes(const std::optional<std::int64_t>& b) {
  return b ? bytes_text(*b) : "-";
}

std::string optional_ms(const std::optional<double>& ms) {
  return ms ? fmt::format("{:.3f}", *ms) : "-";
}

}  // namespace

void activation_plans_section(std::string& out, const std::vector<ActivationPlanReport>& plans) {
  auto to = std::back_inserter(out);
  for (const ActivationPlanReport& p : plans) {
    fmt::format_to(to, "\nactivation plan for {} ({}, budget {}: {})\n", p.chain,
                   p.applied ? "applied" : "suggested", p.budget, bytes_text(p.budget_bytes));
    fmt::format_to(to, "  {}\n", p.message);
    fmt::format_to(
        to, "  activation peak {} -> {} predicted{}; saved after the forward {}\n",
        bytes_text(p.unconstrained_peak_bytes), bytes_text(p.predicted_peak_bytes),
        p.measured_peak_bytes ? ", " + bytes_text(*p.measured_peak_bytes) + " measured" : "",
        bytes_text(p.predicted_stored_bytes));
    fmt::format_to(
        to,
        "  extra per step {:.3f} ms predicted (recompute {:.3f} ms{}, exposed transfer {:.3f} "
        "ms){}\n",
        p.predicted_extra_ms(), p.predicted_recompute_ms,
        p.recompute_flop_fraction
            ? fmt::format(", {:.0f}% of the forward's FLOPs", 100.0 * *p.recompute_flop_fraction)
            : "",
        p.predicted_transfer_ms,
        p.measured_extra_ms ? fmt::format(", {:.3f} ms measured", *p.measured_extra_ms) : "");
    if (p.link_bytes_per_second <= 0)
      out += "  offloading: not measured (no host link bandwidth), so nothing is offloaded\n";
    if (!p.exact) out += "  the chain was long enough that the planner thinned its search\n";
    if (!p.modules.empty()) {
      std::size_t width = 6;
      for (const ActivationModuleRow& m : p.modules) width = std::max(width, m.name.size());
      width = std::min<std::size_t>(width, 40);
      fmt::format_to(to, "  {:<{}} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}  {}\n", "module",
                     width, "kept", "recomputed", "offloaded", "peak", "measured", "extra ms",
                     "measured", "choices");
      for (const ActivationModuleRow& m : p.modules) {
        std::string choices;
        if (!m.recomputed.empty()) choices = "recompute " + names_text(m.recomputed);
        if (!m.offloaded.empty())
          choices +=
              (choices.empty() ? "" : "; ") + std::string("offload ") + names_text(m.offloaded);
        fmt::format_to(to, "  {:<{}} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9.3f} {:>9}  {}\n",
                       m.name, width, bytes_text(m.kept_bytes), bytes_text(m.recomputed_bytes),
                       bytes_text(m.offloaded_bytes), bytes_text(m.predicted_peak_bytes),
                       optional_bytes(m.measured_peak_bytes), m.predicted_extra_ms,
                       optional_ms(m.measured_extra_ms), choices.empty() ? "keep all" : choices);
      }
    }
    if (!p.code.empty()) {
      out += "  apply it:\n";
      std::size_t start = 0;
      while (start < p.code.size()) {
        std::size_t nl = p.code.find('\n', start);
        if (nl == std::string::npos) nl = p.code.size();
        fmt::format_to(to, "    {}\n", p.code.substr(start, nl - start));
        start = nl + 1;
      }
    }
  }
}

}  // namespace fathom::detail
