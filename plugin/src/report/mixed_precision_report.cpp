#include "report/mixed_precision_report.h"

#include <fathom/error.h>
#include <fmt/format.h>

#include <iterator>

#include "base/json_number.h"
#include "report/json_helpers.h"

namespace fathom::detail {
namespace {

using nlohmann::json;

std::string scale_text(double s) { return fmt::format("{:g}", s); }

}  // namespace

json mixed_precision_json(const std::optional<MixedPrecisionSummary>& m) {
  if (!m) return nullptr;
  json phases = json::array();
  for (const PhasePrecision& p : m->phases)
    phases.push_back({{"phase", std::string(phase_name(p.phase))},
                      {"low_precision", p.low_precision},
                      {"fp32", p.fp32}});
  json history = json::array();
  for (const ScalePoint& s : m->scale_history)
    history.push_back({{"step", s.step}, {"scale", s.scale}});
  json events = json::array();
  for (const AmpEvent& e : m->events)
    events.push_back({{"step", e.step},
                      {"kind", std::string(amp_event_kind_name(e.kind))},
                      {"detail", e.detail}});
  return {{"policy", m->policy},
          {"state", m->state},
          {"dtype", m->dtype},
          {"device_type", m->device_type},
          {"grad_scaling", m->grad_scaling},
          {"steps_low_precision", m->steps_low_precision},
          {"steps_fp32", m->steps_fp32},
          {"phases", phases},
          {"skipped_steps", m->skipped_steps},
          {"scale", optional_json(m->scale)},
          {"scale_changes", m->scale_changes},
          {"scale_history", history},
          {"fp32_step_ms", optional_json(m->fp32_step_ms)},
          {"amp_step_ms", optional_json(m->amp_step_ms)},
          {"fp32_loss_reference", optional_json(m->fp32_loss_reference)},
          {"amp_loss", optional_json(m->amp_loss)},
          {"events", events}};
}

std::optional<MixedPrecisionSummary> mixed_precision_from(const json& epoch) {
  auto it = epoch.find("mixed_precision");
  if (it == epoch.end() || it->is_null()) return std::nullopt;
  const json& j = *it;
  MixedPrecisionSummary m;
  m.policy = j.at("policy").get<std::string>();
  m.state = j.at("state").get<std::string>();
  m.dtype = j.at("dtype").get<std::string>();
  m.device_type = j.at("device_type").get<std::string>();
  m.grad_scaling = j.at("grad_scaling").get<bool>();
  m.steps_low_precision = detail::json_integer<std::int64_t>(j.at("steps_low_precision"));
  m.steps_fp32 = detail::json_integer<std::int64_t>(j.at("steps_fp32"));
  for (const json& p : j.at("phases")) {
    const std::string name = p.at("phase").get<std::string>();
    const auto phase = phase_from_name(name);
    if (!phase) throw Error(fmt::format("unknown phase '{}' in mixed_precision.phases", name));
    m.phases.push_back({*phase, detail::json_integer<std::int64_t>(p.at("low_precision")),
                        detail::json_integer<std::int64_t>(p.at("fp32"))});
  }
  m.skipped_steps = detail::json_integer<std::int64_t>(j.at("skipped_steps"));
  m.scale = optional_from<double>(j, "scale");
  m.scale_changes = detail::json_integer<std::int64_t>(j.at("scale_changes"));
  for (const json& s : j.at("scale_history"))
    m.scale_history.push_back(
        {detail::json_integer<std::int64_t>(s.at("step")), s.at("scale").get<double>()});
  m.fp32_step_ms = optional_from<double>(j, "fp32_step_ms");
  m.amp_step_ms = optional_from<double>(j, "amp_step_ms");
  m.fp32_loss_reference = optional_from<double>(j, "fp32_loss_reference");
  m.amp_loss = optional_from<double>(j, "amp_loss");
  for (const json& e : j.at("events")) {
    const std::string name = e.at("kind").get<std::string>();
    const std::optional<AmpEventKind> kind = amp_event_kind_from_name(name);
    if (!kind) throw Error(fmt::format("unknown kind '{}' in mixed_precision.events", name));
    m.events.push_back({detail::json_integer<std::int64_t>(e.at("step")), *kind,
                        e.at("detail").get<std::string>()});
  }
  return m;
}

void mixed_precision_section(std::string& out, const EpochSummary& e) {
  if (!e.mixed_precision) return;
  const MixedPrecisionSummary& m = *e.mixed_precision;
  auto line = std::back_inserter(out);
  if (m.steps_low_precision == 0 && m.events.empty() && !m.scale) {
    fmt::format_to(line, "\nmixed precision: fp32 throughout ({})\n", m.policy);
    return;
  }
  std::string head = fmt::format("\nmixed precision ({}: {}", m.policy, m.state);
  if (!m.dtype.empty()) head += fmt::format(", {} autocast on {}", m.dtype, m.device_type);
  if (m.grad_scaling) head += ", GradScaler";
  out += head + ")\n";
  const std::string low = m.dtype.empty() ? "16-bit" : m.dtype;
  for (const PhasePrecision& p : m.phases) {
    const std::int64_t runs = p.low_precision + p.fp32;
    if (runs == 0) continue;
    std::string text;
    if (p.low_precision == 0)
      text = "fp32";
    else if (p.fp32 == 0)
      text = low;
    else
      text = fmt::format("{} in {} of {}, fp32 in {}", low, p.low_precision, runs, p.fp32);
    if (p.phase == Phase::Backward && p.low_precision > 0)
      text += " (autograd of the forward's casts)";
    if (p.phase == Phase::Optimizer) text += " (fp32 master weights)";
    fmt::format_to(line, "  {:<10} {}\n", phase_name(p.phase), text);
  }
  fmt::format_to(line, "  steps      {} in {}, {} in fp32; {} skipped on inf/NaN gradients\n",
                 m.steps_low_precision, low, m.steps_fp32, m.skipped_steps);
  if (m.scale) {
    std::string history;
    for (const ScalePoint& s : m.scale_history)
      history += fmt::format("{}{} @{}", history.empty() ? "" : ", ", scale_text(s.scale), s.step);
    fmt::format_to(line, "  scale      {} now; {} change{}{}{}\n", scale_text(*m.scale),
                   m.scale_changes, m.scale_changes == 1 ? "" : "s", history.empty() ? "" : ": ",
                   history);
    // The history holds the epoch's first scale, then one point per change.
    if (static_cast<std::int64_t>(m.scale_history.size()) < m.scale_changes + 1)
      fmt::format_to(line, "             (the first and the latest {} shown)\n",
                     m.scale_history.size() - 1);
  }
  if (m.fp32_loss_reference || m.fp32_step_ms) {
    auto opt = [](const std::optional<double>& v, const char* spec) {
      return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
    };
    fmt::format_to(line, "  compared   loss {} mixed vs {} fp32 trend; step {} mixed vs {} fp32\n",
                   opt(m.amp_loss, "{:.4g}"), opt(m.fp32_loss_reference, "{:.4g}"),
                   opt(m.amp_step_ms, "{:.2f} ms"), opt(m.fp32_step_ms, "{:.2f} ms"));
  }
  for (const AmpEvent& ev : m.events)
    fmt::format_to(line, "  step {:<5} {}: {}\n", ev.step, amp_event_kind_name(ev.kind), ev.detail);
}

}  // namespace fathom::detail
