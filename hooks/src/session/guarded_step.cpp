#include <c10/util/Exception.h>
#include <fathom/guarded_step.h>
#include <torch/optim/optimizer.h>

#include <iostream>
#include <optional>

#include "amp/amp_extension.h"
#include "base/warning_sink.h"
#include "checkpoint/checkpoint_extension.h"
#include "framework/session_access.h"

namespace fathom {

int guarded_step(EpochScope& epoch, std::int64_t samples,
                 const std::function<void(StepScope&)>& body, torch::optim::Optimizer* optimizer) {
  using detail::CheckpointExtension;
  check_step_samples(samples);  // here, not in the retry loop: a bad count is no failed step
  // The epoch's own session, whichever others exist or have scopes open.
  detail::SessionState* state = detail::SessionAccess::state(epoch);
  CheckpointExtension* ext = state ? state->extensions().checkpoint : nullptr;
  std::optional<std::size_t> retried_event;  // the error the retry recovers from
  for (int attempt = 1;; ++attempt) {
    try {
      {
        auto step = epoch.step(samples);
        if (detail::AmpExtension* amp = state ? state->extensions().amp : nullptr)
          amp->note_guarded_step();  // a 16-bit failure can be run again: Auto may try it
        body(step);
      }
      if (retried_event && ext) ext->out_of_memory_event(*retried_event).recovered = true;
      return attempt;
    } catch (const c10::OutOfMemoryError& error) {
      // The step scope has ended (as failed), and with the body's stack the step's graph is gone.
      if (!ext) throw;
      const std::size_t index = ext->record_out_of_memory(error);
      std::string action;
      if (attempt > 1) {
        action = "rethrown: the retry ran out of memory too";
      } else if (!ext->auto_mode()) {
        action =
            "rethrown; in Auto mode (FATHOM_MODE=auto) fathom would checkpoint activations and run "
            "the step again";
      } else if (ext->optimizer_started()) {
        action =
            "rethrown: the optimizer phase had begun, and running the step again could apply it "
            "twice";
      } else if (const std::string tightened = ext->tighten(); tightened.empty()) {
        action = "rethrown: no checkpointing plan needs less memory than the one that ran out";
      } else {
        if (optimizer) optimizer->zero_grad(/*set_to_none=*/true);
        ext->release_cached_memory();
        action = "freed " + std::string(optimizer ? "the gradients and " : "") + "cached memory, " +
                 tightened + ", and ran the step again";
        retried_event = index;
      }
      OutOfMemoryEvent& event = ext->out_of_memory_event(index);
      event.action = action;
      event.retried = retried_event == index;
      detail::warn("out of memory in step ", event.step, ", ", phase_name(event.phase), " phase",
                   (event.module.empty() ? "" : ", block " + event.module), ": ", action);
      if (!event.retried) throw;
    } catch (const std::exception& error) {
      // A step that failed under mixed precision (or as Auto's fp32 comparison step) has turned
      // mixed precision off for good; it runs once more, in fp32. Any other error is the loop's.
      detail::AmpExtension* amp = state ? state->extensions().amp : nullptr;
      if (attempt > 1 || !amp || !amp->recover_failed_step(error.what())) throw;
      if (optimizer) optimizer->zero_grad(/*set_to_none=*/true);
    }
  }
}

}  // namespace fathom
