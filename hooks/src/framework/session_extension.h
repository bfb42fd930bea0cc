#pragma once
// A feature that rides on a session's lifecycle: CUPTI collection, NVML sampling, the AMP
// policy, the checkpoint planner, the distributed merge. Each lives in its own file, derives
// from this, and is built in Session's constructor (session/session_features.cpp) — the one
// place that knows them all, so SessionState stays small. The state keeps the ones other code
// reaches as typed pointers (SessionState::Extensions).
//
// Callbacks run on the training thread and must not throw: a failing feature degrades and says so
// in the report, it never stops training. Begin callbacks run in the order the extensions were
// added; on_phase_end and on_step_end in the reverse order (last in, first out, as nested scopes
// end): an extension added later sits inside the earlier ones, and what it set up at a begin
// (autocast, a correlation id) is undone before theirs is. The epoch's end is not an unwinding
// but a pipeline that builds the report: on_footprint, then on_epoch_measured, the advisor, and
// on_epoch_end, each stage in the order the extensions were added, so a later extension reads
// what earlier ones wrote (the distributed one, added last, ships the finished epoch).
#include <ATen/core/Tensor.h>
#include <fathom/phase.h>
#include <fathom/records.h>
#include <fathom/report.h>

#include <cstdint>
#include <string>
#include <vector>

#include "framework/footprint_parts.h"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace fathom::detail {

class SessionExtension {
 public:
  virtual ~SessionExtension() = default;
  // An extension every session builds may wait for the user to turn its feature on (the
  // distributed one until use_process_group): until then the session skips its callbacks.
  virtual bool engaged() const noexcept { return true; }
  virtual void on_epoch_begin(std::int64_t /*epoch*/) noexcept {}
  virtual void on_step_begin(std::int64_t /*step*/) noexcept {}
  virtual void on_phase_begin(Phase /*phase*/) noexcept {}
  virtual void on_phase_end(Phase /*phase*/, bool /*aborted*/) noexcept {}
  virtual void on_step_end(std::int64_t /*step*/, bool /*failed*/) noexcept {}
  // The step as the report counts it (its samples, begin and end on fathom's clock), once every
  // on_step_end ran: in the order the extensions were added.
  virtual void on_step_timed(const StepRecord& /*step*/) noexcept {}
  // The feature's own part of the epoch's memory footprint (footprint_parts.h). Runs before
  // on_epoch_measured; the session merges the parts, so whatever on_epoch_measured sees already
  // holds the whole footprint.
  virtual void on_footprint(FootprintParts& /*parts*/, Environment& /*environment*/) noexcept {}
  // Adds what the feature measured and what it did to the epoch as typed sections (the GPU
  // summary, mixed precision with Auto's events, the module report with its plans; not-measured
  // entries) before the advisor reads it. The advisor makes every finding from those sections.
  virtual void on_epoch_measured(EpochSummary& /*epoch*/, Environment& /*environment*/) noexcept {}
  // Reads the finished epoch, findings included, before the report is written (the distributed
  // merge sends it to rank 0); it adds or edits no finding.
  virtual void on_epoch_end(EpochSummary& /*epoch*/, Environment& /*environment*/) noexcept {}
  // Returns once what the feature writes off the training thread is on disk (flush_report).
  virtual void on_flush() noexcept {}
  // What the loop watched (Session::watch), on its thread, in the order the extensions were
  // added: a model (name: its short type, the footprint's key), parameters a Python model handed
  // over, an optimizer. These may throw a fathom::Error for the loop to see (misuse).
  virtual void on_watch_model(const torch::nn::Module& /*model*/, const std::string& /*name*/) {}
  virtual void on_watch_parameters(const void* /*key*/, const std::string& /*name*/,
                                   const std::vector<at::Tensor>& /*parameters*/) {}
  virtual void on_watch_optimizer(const torch::optim::Optimizer& /*optimizer*/) {}
};

}  // namespace fathom::detail
