#include "report/activation_plan_writers.h"

#include <fathom/checkpoint_planner.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "base/bytes_text.h"
#include "base/json_number.h"
#include "report/json_helpers.h"

namespace fathom::detail {
namespace {

using nlohmann::json;

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

json activation_plans_json(const std::vector<ActivationPlanReport>& plans) {
  json out = json::array();
  for (const ActivationPlanReport& p : plans) {
    json modules = json::array();
    for (const ActivationModuleRow& m : p.modules) {
      modules.push_back({{"name", m.name},
                         {"kept_bytes", m.kept_bytes},
                         {"recomputed_bytes", m.recomputed_bytes},
                         {"offloaded_bytes", m.offloaded_bytes},
                         {"recomputed", m.recomputed},
                         {"offloaded", m.offloaded},
                         {"predicted_peak_bytes", m.predicted_peak_bytes},
                         {"measured_peak_bytes", optional_json(m.measured_peak_bytes)},
                         {"predicted_extra_ms", m.predicted_extra_ms},
                         {"measured_extra_ms", optional_json(m.measured_extra_ms)}});
    }
    out.push_back({{"chain", p.chain},
                   {"budget", p.budget},
                   {"budget_bytes", p.budget_bytes},
                   {"unconstrained_peak_bytes", p.unconstrained_peak_bytes},
                   {"min_feasible_budget_bytes", p.min_feasible_budget_bytes},
                   {"predicted_peak_bytes", p.predicted_peak_bytes},
                   {"measured_peak_bytes", optional_json(p.measured_peak_bytes)},
                   {"predicted_stored_bytes", p.predicted_stored_bytes},
                   {"forward_ms", p.forward_ms},
                   {"predicted_recompute_ms", p.predicted_recompute_ms},
                   {"predicted_transfer_ms", p.predicted_transfer_ms},
                   {"measured_extra_ms", optional_json(p.measured_extra_ms)},
                   {"recompute_flop_fraction", optional_json(p.recompute_flop_fraction)},
                   {"link_bytes_per_second", p.link_bytes_per_second},
                   {"feasible", p.feasible},
                   {"exact", p.exact},
                   {"applied", p.applied},
                   {"modules", modules},
                   {"message", p.message},
                   {"code", p.code}});
  }
  return out;
}

std::vector<ActivationPlanReport> activation_plans_from(const json& modules) {
  std::vector<ActivationPlanReport> out;
  const auto it = modules.find("activation_plans");
  if (it == modules.end() || it->is_null()) return out;
  for (const json& x : *it) {
    ActivationPlanReport p;
    p.chain = x.at("chain").get<std::string>();
    p.budget = x.at("budget").get<std::string>();
    p.budget_bytes = json_integer<std::int64_t>(x.at("budget_bytes"));
    p.unconstrained_peak_bytes = json_integer<std::int64_t>(x.at("unconstrained_peak_bytes"));
    p.min_feasible_budget_bytes = json_integer<std::int64_t>(x.at("min_feasible_budget_bytes"));
    p.predicted_peak_bytes = json_integer<std::int64_t>(x.at("predicted_peak_bytes"));
    p.measured_peak_bytes = optional_from<std::int64_t>(x, "measured_peak_bytes");
    p.predicted_stored_bytes = json_integer<std::int64_t>(x.at("predicted_stored_bytes"));
    p.forward_ms = x.at("forward_ms").get<double>();
    p.predicted_recompute_ms = x.at("predicted_recompute_ms").get<double>();
    p.predicted_transfer_ms = x.at("predicted_transfer_ms").get<double>();
    p.measured_extra_ms = optional_from<double>(x, "measured_extra_ms");
    p.recompute_flop_fraction = optional_from<double>(x, "recompute_flop_fraction");
    p.link_bytes_per_second = x.at("link_bytes_per_second").get<double>();
    p.feasible = x.at("feasible").get<bool>();
    p.exact = x.at("exact").get<bool>();
    p.applied = x.at("applied").get<bool>();
    for (const json& m : x.at("modules")) {
      ActivationModuleRow row;
      row.name = m.at("name").get<std::string>();
      row.kept_bytes = json_integer<std::int64_t>(m.at("kept_bytes"));
      row.recomputed_bytes = json_integer<std::int64_t>(m.at("recomputed_bytes"));
      row.offloaded_bytes = json_integer<std::int64_t>(m.at("offloaded_bytes"));
      row.recomputed = m.at("recomputed").get<std::vector<std::string>>();
      row.offloaded = m.at("offloaded").get<std::vector<std::string>>();
      row.predicted_peak_bytes = json_integer<std::int64_t>(m.at("predicted_peak_bytes"));
      row.measured_peak_bytes = optional_from<std::int64_t>(m, "measured_peak_bytes");
      row.predicted_extra_ms = m.at("predicted_extra_ms").get<double>();
      row.measured_extra_ms = optional_from<double>(m, "measured_extra_ms");
      p.modules.push_back(std::move(row));
    }
    p.message = x.at("message").get<std::string>();
    p.code = x.at("code").get<std::string>();
    out.push_back(std::move(p));
  }
  return out;
}

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
