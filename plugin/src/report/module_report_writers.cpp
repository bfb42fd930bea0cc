#include "report/module_report_writers.h"

#include <fathom/checkpoint_plan.h>
#include <fathom/error.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "base/bytes_text.h"
#include "base/json_fields.h"
#include "report/activation_plan_writers.h"

namespace fathom::detail {

// A segment as [begin, end).
template <>
struct JsonCodec<CheckpointSegment> {
  static nlohmann::json write(const CheckpointSegment& s) {
    return nlohmann::json::array({s.begin, s.end});
  }
  static void read(const nlohmann::json& j, CheckpointSegment& s) {
    s.begin = json_integer<int>(j.at(0));
    s.end = json_integer<int>(j.at(1));
  }
};

template <typename V>
static void fields(V& v, ModuleMeasurement& x) {
  v("chain", x.chain);
  v("name", x.name);
  v("calls", x.calls);
  v("saved_bytes", x.saved_bytes);
  v("own_bytes", x.own_bytes);
  v("input_saved_bytes", x.input_saved_bytes);
  v("output_saved_bytes", x.output_saved_bytes);
  v("input_bytes", x.input_bytes);
  v("output_bytes", x.output_bytes);
  v("aliases_input", x.aliases_input);
  v("forward_ms", x.forward_ms);
  v.since("forward_device_ms", x.forward_device_ms);
  v("checkpointed", x.checkpointed);
}

template <typename V>
static void fields(V& v, CheckpointPlanReport& p) {
  v("chain", p.chain);
  v("budget", p.budget);
  v("budget_bytes", p.budget_bytes);
  v("unconstrained_peak_bytes", p.unconstrained_peak_bytes);
  v("predicted_peak_bytes", p.predicted_peak_bytes);
  v("min_feasible_budget_bytes", p.min_feasible_budget_bytes);
  v("forward_ms", p.forward_ms);
  v("recompute_ms", p.recompute_ms);
  v.since("step_overhead", p.step_overhead);
  v("predicted_stored_bytes", p.predicted_stored_bytes);
  v.since("measured_stored_bytes", p.measured_stored_bytes);
  v("feasible", p.feasible);
  v("applied", p.applied);
  v("segments", p.segments);
  v("message", p.message);
  v("code", p.code);
}

template <typename V>
static void fields(V& v, ActivationModuleRow& m) {
  v("name", m.name);
  v("kept_bytes", m.kept_bytes);
  v("recomputed_bytes", m.recomputed_bytes);
  v("offloaded_bytes", m.offloaded_bytes);
  v("recomputed", m.recomputed);
  v("offloaded", m.offloaded);
  v("predicted_peak_bytes", m.predicted_peak_bytes);
  v.since("measured_peak_bytes", m.measured_peak_bytes);
  v("predicted_extra_ms", m.predicted_extra_ms);
  v.since("measured_extra_ms", m.measured_extra_ms);
}

template <typename V>
static void fields(V& v, ActivationPlanReport& p) {
  v("chain", p.chain);
  v("budget", p.budget);
  v("budget_bytes", p.budget_bytes);
  v("unconstrained_peak_bytes", p.unconstrained_peak_bytes);
  v("min_feasible_budget_bytes", p.min_feasible_budget_bytes);
  v("predicted_peak_bytes", p.predicted_peak_bytes);
  v.since("measured_peak_bytes", p.measured_peak_bytes);
  v("predicted_stored_bytes", p.predicted_stored_bytes);
  v("forward_ms", p.forward_ms);
  v("predicted_recompute_ms", p.predicted_recompute_ms);
  v("predicted_transfer_ms", p.predicted_transfer_ms);
  v.since("measured_extra_ms", p.measured_extra_ms);
  v.since("recompute_flop_fraction", p.recompute_flop_fraction);
  v("link_bytes_per_second", p.link_bytes_per_second);
  v("feasible", p.feasible);
  v("exact", p.exact);
  v("applied", p.applied);
  v("modules", p.modules);
  v("message", p.message);
  v("code", p.code);
}

template <typename V>
static void fields(V& v, OutOfMemoryEvent& o) {
  v("step", o.step);
  v("phase", o.phase);
  v("module", o.module);
  v.since("peak_allocated_bytes", o.peak_allocated_bytes);
  v.since("device_memory_bytes", o.device_memory_bytes);
  v("error", o.error);
  v("retried", o.retried);
  v("recovered", o.recovered);
  v("action", o.action);
}

template <typename V>
static void describe(V& v, ModuleReport& m) {
  v("source", m.source);
  v("profiled_steps", m.profiled_steps);
  v("modules", m.modules);
  v("checkpoint_plans", m.plans);
  v.since("activation_plans", m.activation_plans);  // absent in reports written before them
  v("out_of_memory", m.out_of_memory);
}

namespace {

void print_indented(std::string& out, const std::string& text, std::string_view indent) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    fmt::format_to(std::back_inserter(out), "{}{}\n", indent, text.substr(start, nl - start));
    start = nl + 1;
  }
}

}  // namespace

void fields(JsonWriter& v, ModuleReport& m) { describe(v, m); }
void fields(JsonReader& v, ModuleReport& m) { describe(v, m); }

void module_report_section(std::string& out, const EpochSummary& e) {
  if (!e.modules) return;
  const ModuleReport& m = *e.modules;
  auto to = std::back_inserter(out);
  if (!m.modules.empty()) {
    fmt::format_to(to, "\nactivations by module ({} profiled step{}; {})\n", m.profiled_steps,
                   m.profiled_steps == 1 ? "" : "s", m.source);
    std::size_t width = 6;
    for (const ModuleMeasurement& x : m.modules) width = std::max(width, x.name.size());
    width = std::min<std::size_t>(width, 48);
    fmt::format_to(to, "  {:<{}} {:>11} {:>11} {:>10} {:>10} {}\n", "module", width, "saved",
                   "output", "fwd ms", "device ms", "");
    std::string chain;
    for (const ModuleMeasurement& x : m.modules) {
      if (x.chain != chain) {
        chain = x.chain;
        fmt::format_to(to, "  [{}]\n", chain);
      }
      const std::string device =
          x.forward_device_ms ? fmt::format("{:.3f}", *x.forward_device_ms) : "-";
      fmt::format_to(to, "  {:<{}} {:>11} {:>11} {:>10.3f} {:>10} {}\n", x.name, width,
                     bytes_text(x.saved_bytes), bytes_text(x.output_bytes), x.forward_ms, device,
                     x.checkpointed ? "checkpointed" : "");
    }
  }
  for (const CheckpointPlanReport& p : m.plans) {
    fmt::format_to(to, "\ncheckpoint plan for {} ({}, budget {}: {})\n", p.chain,
                   p.applied ? "applied" : "suggested", p.budget, bytes_text(p.budget_bytes));
    fmt::format_to(to, "  {}\n", p.message);
    if (p.feasible) {
      fmt::format_to(
          to,
          "  activation peak {} -> {} predicted; recompute {:.3f} ms per step ({:.0f}% of "
          "the forward{})\n",
          bytes_text(p.unconstrained_peak_bytes), bytes_text(p.predicted_peak_bytes),
          p.recompute_ms, p.forward_ms > 0 ? 100.0 * p.recompute_ms / p.forward_ms : 0.0,
          p.step_overhead ? fmt::format(", {:.1f}% of a step", 100.0 * *p.step_overhead) : "");
      fmt::format_to(
          to, "  saved after the forward: {} predicted{}\n", bytes_text(p.predicted_stored_bytes),
          p.measured_stored_bytes ? ", " + bytes_text(*p.measured_stored_bytes) + " measured" : "");
    }
    if (!p.code.empty()) {
      out += "  apply it:\n";
      print_indented(out, p.code, "    ");
    }
  }
  activation_plans_section(out, m.activation_plans);
  for (const OutOfMemoryEvent& o : m.out_of_memory) {
    fmt::format_to(to, "\nout of memory in step {}, {} phase{}\n", o.step, phase_name(o.phase),
                   o.module.empty() ? "" : ", module " + o.module);
    if (o.peak_allocated_bytes)
      fmt::format_to(to, "  peak allocated {}{}\n", bytes_text(*o.peak_allocated_bytes),
                     o.device_memory_bytes ? " of " + bytes_text(*o.device_memory_bytes) : "");
    fmt::format_to(to, "  error: {}\n", o.error);
    fmt::format_to(
        to, "  fathom: {}{}\n", o.action,
        o.retried ? (o.recovered ? " (the retry succeeded)" : " (the retry failed)") : "");
  }
}

}  // namespace fathom::detail
