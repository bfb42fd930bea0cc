#pragma once
// A training step that survives running out of memory. A StepScope ends in its destructor, which
// cannot run the step again; guarded_step owns the step instead:
//
//   for (auto& batch : *loader) {
//     fathom::guarded_step(epoch, batch.data.size(0), [&](fathom::StepScope& step) {
//       auto x = step.to_device(batch.data, device);
//       torch::Tensor loss;
//       { auto f = step.forward(); loss = criterion(fathom::forward(model, x), y); }
//       { auto b = step.backward(); optimizer.zero_grad(); loss.backward(); }
//       { auto o = step.optimizer(); optimizer.step(); }
//     }, &optimizer);
//   }
//
// When the body throws c10::OutOfMemoryError, the report records the step, the phase, the block
// that was running (fathom::forward items, fathom::block) and the allocator's peak. In Auto mode,
// if the optimizer phase had not begun, fathom frees what it can (the failed step's graph is gone
// with its stack; the gradients are set to none through `optimizer`; cached device blocks go back
// to the driver), plans checkpointing tighter and runs the body once more as a new step. The
// optimizer is never applied twice: an error after step.optimizer() began is not retried. In
// every other case the error is rethrown after the diagnosis is recorded (the report is written
// when the epoch scope ends, by that exception too). With fathom off, the body runs once, as is.
//
// In Auto mode a step that throws any error while it runs under mixed precision, or as one of
// the watch's fp32 comparison steps, turns mixed precision off for good (the report's event has
// the error) and runs once more in fp32, under the same rule: not after step.optimizer() began.
//
// The body must be safe to run again: it rebuilds its tensors from the batch, and zeroes the
// gradients before backward (or passes the optimizer, so fathom does).
#include <fathom/session.h>

#include <cstdint>
#include <functional>

namespace torch::optim {
class Optimizer;
}

namespace fathom {

// Returns the number of times the body ran (1, or 2 after a recovered out-of-memory error or a
// step that failed under mixed precision).
int guarded_step(EpochScope& epoch, std::int64_t samples,
                 const std::function<void(StepScope&)>& body,
                 torch::optim::Optimizer* optimizer = nullptr);

}  // namespace fathom
