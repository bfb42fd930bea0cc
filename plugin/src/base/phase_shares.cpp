// One set of phase shares for every writer and rule: the terminal and HTML tables and the data
// and unscoped-time findings read them here, so they cannot disagree (issue 16: a finding said
// 18.2 % where the table said 22.2 %, and the table's shares summed to 102 %).
#include <fathom/report.h>

#include <algorithm>

namespace fathom {

double EpochSummary::cycle_ms_total() const noexcept {
  const PhaseSummary& data = phase(Phase::Data);
  return step_ms_total + (data.inferred ? data.wall_ms_total : 0.0);
}

double EpochSummary::phase_share(Phase p) const noexcept {
  const double cycle = cycle_ms_total();
  return cycle > 0 ? phase(p).wall_ms_total / cycle : 0.0;
}

double EpochSummary::outside_phases_share() const noexcept {
  const double cycle = cycle_ms_total();
  if (cycle <= 0) return 0.0;
  double in_phases = 0;
  for (const PhaseSummary& p : phases) in_phases += p.wall_ms_total;
  return std::clamp((cycle - in_phases) / cycle, 0.0, 1.0);
}

}  // namespace fathom
