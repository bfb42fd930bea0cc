#pragma once
// An epoch of training steps without an optimizer step, so every step's gradients are those of the
// same weights: what the checkpoint and activation-plan tests compare bit for bit across runs.
#include <fathom/fathom.h>
#include <torch/torch.h>

namespace fathom::test {

// model: a module holder (Sequential, a TORCH_MODULE), run through fathom::forward.
template <typename Model>
void run_gradient_steps(Session& session, Model& model, const at::Tensor& x, int steps) {
  auto e = session.epoch();
  for (int s = 0; s < steps; ++s) {
    auto step = e.step(x.size(0));
    at::Tensor loss;
    {
      auto f = step.forward();
      loss = fathom::forward(model, x).pow(2).mean();
    }
    {
      auto b = step.backward();
      model->zero_grad();
      loss.backward();
    }
  }
}

}  // namespace fathom::test
