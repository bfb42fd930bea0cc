// The compact epoch summary a session prints by default (issue 16: about 60 lines an epoch, the
// same fix code every epoch, were too many for a real loop). The full report is
// format_terminal_report; this is its first lines, and findings already said once are one line.
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <iterator>

#include "base/terminal_text.h"
#include "report/no_findings_text.h"

namespace fathom {
namespace {

// The new findings shown in full (one line each); the rest are counted.
constexpr std::size_t kShownFindings = 3;

}  // namespace

std::string finding_key(const Finding& f) { return f.id + '\n' + f.fix; }

std::string format_terminal_summary(const RunReport& report, int epoch,
                                    std::set<std::string>& said_before) {
  if (report.epochs.empty()) return "fathom: no epoch has ended yet\n";
  const std::size_t i = epoch < 0 ? report.epochs.size() - 1 : static_cast<std::size_t>(epoch);
  if (i >= report.epochs.size()) return fmt::format("fathom: no epoch {} in this report\n", epoch);
  const EpochSummary& e = report.epochs[i];
  std::string out;
  auto o = std::back_inserter(out);
  fmt::format_to(o, "fathom | {} | epoch {} | {} steps | step {:.2f} ms mean, {:.2f} ms max",
                 report.run_name, e.index, e.steps, e.step_ms_mean(), e.step_ms_max);
  if (e.samples > 0) fmt::format_to(o, " | {:.1f} samples/s", e.samples_per_second());
  if (e.failed_steps) fmt::format_to(o, " | {} failed", e.failed_steps);
  if (e.ended_by_exception) out += " | ENDED BY EXCEPTION";
  out += "\n";
  std::size_t shown = 0, more = 0, number = 0;
  std::string still_true;
  for (const Finding& f : e.findings) {
    const std::string key = finding_key(f);
    if (said_before.count(key)) {
      still_true += (still_true.empty() ? "" : "; ") + f.title;
      continue;
    }
    if (shown == kShownFindings) {
      ++more;
      continue;
    }
    ++shown;
    said_before.insert(key);
    fmt::format_to(o, "  {}. {:<10} {}{}\n", ++number,
                   fmt::format("[{}]", f.applied ? "applied" : severity_name(f.severity)), f.title,
                   f.estimated_gain.empty() || f.applied ? "" : " -> " + f.estimated_gain);
  }
  if (!still_true.empty()) fmt::format_to(o, "  still true: {}\n", still_true);
  if (e.findings.empty())
    fmt::format_to(o, "  findings: {}\n", detail::no_findings_text(report.environment));
  if (more)
    fmt::format_to(o, "  ... {} more finding{} in the report\n", more, more == 1 ? "" : "s");
  return detail::terminal_safe(out);
}

}  // namespace fathom
