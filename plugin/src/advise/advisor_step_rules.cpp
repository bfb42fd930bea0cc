// Rules on the epoch's step series (step_series.h): step time that changed mid-epoch and stayed
// changed, and memory that creeps up step after step. Both come from rank tests in
// analyze/step_alarms.cpp, which the session runs before the advisor.
#include <fmt/format.h>

#include <algorithm>

#include "advise/advisor_rules.h"
#include "analyze/step_alarms.h"
#include "base/thresholds.h"

namespace fathom::advice {

namespace {

// The event of Auto mode's own switch to 16 bits at the change, if it made the change: the first
// mixed-precision step is the one after the event, and the series may hold every stride-th step.
const AmpEvent* auto_switch_at(const EpochSummary& e, const StepChange& c) {
  if (!e.mixed_precision) return nullptr;
  const std::int64_t near = 2 * std::max<std::int64_t>(e.series->stride, 1);
  for (const AmpEvent& ev : e.mixed_precision->events) {
    if (ev.kind != AmpEventKind::Enabled) continue;
    const std::int64_t first = ev.step + 1 - e.mixed_precision->first_step;
    if (c.step >= first - near && c.step <= first + near) return &ev;
  }
  return nullptr;
}

}  // namespace

void step_slowdown(const EpochSummary& e, std::vector<Finding>& out) {
  if (!e.series || !e.series->change) return;
  const StepChange& c = *e.series->change;
  if (const AmpEvent* ev = auto_switch_at(e, c)) {
    // Issue 24: Auto's bf16 made steps 228x slower and this finding blamed another job. It is
    // fathom's own change: say so, with what Auto did about it.
    const MixedPrecisionSummary& m = *e.mixed_precision;
    std::string title = step_change_text(c);
    title[0] = 'S';
    Finding f = make_finding(
        finding_id::kStepSlowdown, Severity::Info,
        title + ": Auto mode's switch to " + (m.dtype.empty() ? std::string("16 bits") : m.dtype));
    f.evidence.push_back({"median step time before / after",
                          fmt::format("{:.3f} ms / {:.3f} ms", c.before_ms, c.after_ms)});
    f.evidence.push_back({"Auto mode's switch",
                          fmt::format("mixed precision on after step {} (its event)", ev->step)});
    f.evidence.push_back({"mixed precision at the epoch's end", m.state});
    f.why =
        "fathom's Auto mode turned mixed precision on at this step, to time it against fp32: the "
        "change is fathom's own doing, not the machine's or the loop's. Auto keeps it only "
        "when the steps are faster and rolls it back at once when they are far slower; the "
        "mixed-precision section's events say what the trial measured and decided.";
    f.fix =
        "fathom::configure_amp(session, "
        "fathom::AmpOptions().when(fathom::AmpOptions::When::Never));"
        "  // keeps Auto mode off mixed precision";
    out.push_back(std::move(f));
    return;
  }
  // The sentence the session's in-run warning and NVTX mark say, capitalized as a title.
  std::string title = step_change_text(c);
  title[0] = 'S';
  Finding f = make_finding(finding_id::kStepSlowdown, Severity::Warning, std::move(title));
  f.evidence.push_back({"median step time before / after",
                        fmt::format("{:.3f} ms / {:.3f} ms", c.before_ms, c.after_ms)});
  f.evidence.push_back({"steps in the series before / after",
                        fmt::format("{} / {} (every {} step{})", c.steps_before, c.steps_after,
                                    e.series->stride, e.series->stride == 1 ? "" : "s")});
  f.evidence.push_back({"Pettitt's rank test", fmt::format("p = {:.1e}", c.p_value)});
  if (!c.phase.empty())
    f.evidence.push_back(
        {"the phase that grew most", fmt::format("{}: {:.3f} -> {:.3f} ms (median)", c.phase,
                                                 c.phase_before_ms, c.phase_after_ms)});
  if (e.telemetry && !e.telemetry->throttle.empty()) {
    std::string reasons;
    for (const ThrottleShare& t : e.telemetry->throttle)
      reasons += fmt::format("{}{} {:.0f}%", reasons.empty() ? "" : ", ", t.reason, 100 * t.share);
    f.evidence.push_back({"clock reasons over the epoch (NVML)", reasons});
  }
  if (e.device_memory && e.device_memory->alloc_retries > 0)
    f.evidence.push_back(
        {"allocator retries over the epoch", std::to_string(e.device_memory->alloc_retries)});
  f.why =
      "Steps got slower at one point and stayed slower: something changed then (input shapes, a "
      "data source, clocks, memory pressure, another job on the machine), not noise: a rank test "
      "over every step, which single slow steps cannot trigger.";
  const double after_share =
      static_cast<double>(c.steps_after) / static_cast<double>(c.steps_before + c.steps_after);
  f.gain_fraction = c.relative / (1 + c.relative) * after_share;
  f.estimated_gain = fmt::format("{:.0f}% of the time of the steps since step {}",
                                 100 * c.relative / (1 + c.relative), c.step);
  f.fix = c.phase.empty()
              ? std::string(
                    "// look at what changed at that step (Nsight Systems: the fathom "
                    "step range of that number)")
              : fmt::format(
                    "// the {} phase grew at step {}: compare a step before and after it in "
                    "Nsight Systems (fathom's step ranges), or FATHOM_NVTX=ops for its ops",
                    c.phase, c.step);
  out.push_back(std::move(f));
}

void memory_creep(const EpochSummary& e, std::vector<Finding>& out) {
  if (!e.series || !e.series->creep) return;
  const MemoryCreep& c = *e.series->creep;
  // The in-run warning's sentence, less "since step N" (the evidence gives the steps).
  std::string title = memory_creep_text(c, e.series->memory);
  title.resize(title.rfind(" since step"));
  Finding f = make_finding(finding_id::kMemoryCreep, Severity::Warning, std::move(title));
  f.evidence.push_back({"growth per step (Theil-Sen)", bytes_text(c.bytes_per_step)});
  f.evidence.push_back({"steps", fmt::format("{} to {}", c.from_step, c.to_step)});
  f.evidence.push_back({"first quarter / last quarter (median)",
                        fmt::format("{} / {}", bytes_text(static_cast<double>(c.first_bytes)),
                                    bytes_text(static_cast<double>(c.last_bytes)))});
  f.evidence.push_back({"Mann-Kendall trend", fmt::format("z = {:.1f}", c.z)});
  f.why =
      "Memory that rises with every step runs out eventually. The classic cause is a tensor kept "
      "across steps together with its autograd graph (a running loss summed without detach(), a "
      "list of outputs), which keeps every step's activations alive.";
  f.estimated_gain = "the out-of-memory error this growth leads to";
  f.fix =
      "running_loss += loss.detach();     // or loss.item<float>(), not loss itself\n"
      "history.push_back(out.detach());   // keep values, not graphs";
  out.push_back(std::move(f));
}

}  // namespace fathom::advice
