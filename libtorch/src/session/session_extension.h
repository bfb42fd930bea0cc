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
  // Adds what the feature measured and what it did to the epoch as typed sections (the GPU
  // summary, mixed precision with Auto's events, the module report with its plans; not-measured
  // entries) before the advisor reads it. The advisor makes every finding from those sections.
  virtual void on_epoch_measured(EpochSummary& /*epoch*/, Environment& /*environment*/) noexcept {}
  // Reads the finished epoch, findings included, before the report is written (the distributed
  // merge sends it to rank 0); it adds or edits no finding.
  virtual void on_epoch_end(EpochSummary& /*epoch*/, Environment& /*environment*/) noexcept {}
};

}  // namespace fathom::detail
