// The step's mixed-precision calls (<fathom/session.h>: scaled, loss, apply, unscale), which
// reach the AMP feature of the step's session: the composition root's, as they join the two.
#include <fathom/session.h>
#include <torch/optim/optimizer.h>

#include "amp/amp_extension.h"
#include "framework/session_state.h"

namespace fathom {

at::Tensor StepScope::scaled(const at::Tensor& loss) {
  detail::AmpExtension* amp = detail::amp_of(state_);
  return amp ? amp->scaled(loss) : loss;
}

void StepScope::loss(const at::Tensor& loss) {
  if (detail::AmpExtension* amp = detail::amp_of(state_)) amp->loss(loss);
}

bool StepScope::apply(torch::optim::Optimizer& optimizer) {
  if (detail::AmpExtension* amp = detail::amp_of(state_)) return amp->apply(optimizer);
  optimizer.step();
  return true;
}

void StepScope::unscale(torch::optim::Optimizer& optimizer) {
  if (detail::AmpExtension* amp = detail::amp_of(state_)) amp->unscale(optimizer);
}

}  // namespace fathom
