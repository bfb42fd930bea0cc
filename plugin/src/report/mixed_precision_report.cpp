#include "report/mixed_precision_report.h"

#include <fathom/error.h>
#include <fmt/format.h>

#include <iterator>

#include "base/json_fields.h"

namespace fathom::detail {

template <>
struct JsonCodec<AmpEventKind> {
  static nlohmann::json write(AmpEventKind k) { return std::string(amp_event_kind_name(k)); }
  static void read(const nlohmann::json& j, AmpEventKind& k) {
    const auto name = j.get<std::string>();
    const auto kind = amp_event_kind_from_name(name);
    if (!kind) throw Error(fmt::format("unknown kind '{}' in mixed_precision.events", name));
    k = *kind;
  }
};

template <typename V>
static void fields(V& v, PhasePrecision& p) {
  v("phase", p.phase);
  v("low_precision", p.low_precision);
  v("fp32", p.fp32);
}

template <typename V>
static void fields(V& v, ScalePoint& s) {
  v("step", s.step);
  v("scale", s.scale);
}

template <typename V>
static void fields(V& v, AmpEvent& e) {
  v("step", e.step);
  v("kind", e.kind);
  v("detail", e.detail);
}

// first_step and device are the session's working state, not the report's.
template <typename V>
static void describe(V& v, MixedPrecisionSummary& m) {
  v("policy", m.policy);
  v("state", m.state);
  v("dtype", m.dtype);
  v("device_type", m.device_type);
  v("grad_scaling", m.grad_scaling);
  v("steps_low_precision", m.steps_low_precision);
  v("steps_fp32", m.steps_fp32);
  v("phases", m.phases);
  v("skipped_steps", m.skipped_steps);
  v.since("scale", m.scale);
  v("scale_changes", m.scale_changes);
  v("scale_history", m.scale_history);
  v.since("fp32_step_ms", m.fp32_step_ms);
  v.since("amp_step_ms", m.amp_step_ms);
  v.since("fp32_loss_reference", m.fp32_loss_reference);
  v.since("amp_loss", m.amp_loss);
  v("events", m.events);
}

namespace {

std::string scale_text(double s) { return fmt::format("{:g}", s); }

}  // namespace

void fields(JsonWriter& v, MixedPrecisionSummary& m) { describe(v, m); }
void fields(JsonReader& v, MixedPrecisionSummary& m) { describe(v, m); }

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
