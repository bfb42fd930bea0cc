#pragma once
// A feature that rides on a session's lifecycle: CUPTI collection, NVML sampling, the AMP
// policy, the checkpoint planner, the distributed merge. Each lives in its own file, derives
// from this, and is added in Session's constructor (session.cpp) — the one place that knows
// them all, so SessionState stays small.
//
// Callbacks run on the training thread, in the order the extensions were added, and must not
// throw: a failing feature degrades and says so in the report, it never stops training.
#include <fathom/phase.h>
#include <fathom/report.h>

#include <cstdint>

namespace fathom::detail {

class SessionExtension {
 public:
  virtual ~SessionExtension() = default;
  virtual void on_epoch_begin(std::int64_t /*epoch*/) noexcept {}
  virtual void on_step_begin(std::int64_t /*step*/) noexcept {}
  virtual void on_phase_begin(Phase /*phase*/) noexcept {}
  virtual void on_phase_end(Phase /*phase*/, bool /*aborted*/) noexcept {}
  virtual void on_step_end(std::int64_t /*step*/, bool /*failed*/) noexcept {}
  // Adds what the feature measured to the epoch (sections such as the GPU summary,
  // not-measured entries) before the advisor reads it.
  virtual void on_epoch_measured(EpochSummary& /*epoch*/, Environment& /*environment*/) noexcept {}
  // Adds what the feature did (its own findings, `applied` flags on the advisor's findings)
  // after the advisor ran and before the report is written.
  virtual void on_epoch_end(EpochSummary& /*epoch*/, Environment& /*environment*/) noexcept {}
};

}  // namespace fathom::detail
