#pragma once
// Blocks a loop runs one by one (ModuleList items, transformer layers, blocks of your own):
// fathom::block runs one inside its module range and, like fathom::forward for a Sequential's
// items, measures in the session's profiled steps what it saves for backward and how long its
// forward takes, and checkpoints it when the session's plan says so (Auto mode). The blocks one
// step runs, in order, form one chain for the checkpoint planner; each is checkpointed on its own.
//
//   for (auto& layer : *layers) x = fathom::block(layer, x);      // instead of layer->forward(x)
#include <ATen/core/Tensor.h>
#include <fathom/checkpoint.h>

#include <concepts>
#include <memory>

namespace fathom {

// module: the block (its parameters and buffers, its name in the report); forward: what it
// computes.
at::Tensor block(const std::shared_ptr<torch::nn::Module>& module, const TensorFunction& forward,
                 const at::Tensor& input);

template <typename ModuleHolder>
requires requires(ModuleHolder& h, const at::Tensor& x) {
  h.ptr();
  { h->forward(x) } -> std::convertible_to<at::Tensor>;
}
at::Tensor block(ModuleHolder& module, const at::Tensor& input) {
  return block(
      std::static_pointer_cast<torch::nn::Module>(module.ptr()),
      [module](const at::Tensor& x) mutable -> at::Tensor { return module->forward(x); }, input);
}

}  // namespace fathom
