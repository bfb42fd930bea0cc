#pragma once
// Blocks a loop runs one by one (ModuleList items, transformer layers, blocks of your own):
// fathom::block runs one inside its module range and, like fathom::forward for a Sequential's
// items, measures in the session's profiled steps what it saves for backward and how long its
// forward takes, and checkpoints it when the session's plan says so (Auto mode). The blocks one
// step runs, in order, form one chain for the checkpoint planner; each is checkpointed on its own.
//
//   for (auto& layer : *layers) x = fathom::block<BlockImpl>(layer, x);  // a ModuleList's items
//   for (auto& layer : layers) x = fathom::block(layer, x);   // a std::vector of holders
//
// Any module form (module_forms.h): a holder, a std::shared_ptr to a module class, the module
// object, or a ModuleList / ModuleDict item with its type named.
#include <ATen/core/Tensor.h>
#include <fathom/checkpoint.h>
#include <fathom/module_forms.h>

#include <concepts>
#include <memory>

namespace fathom {

// module: the block (its parameters and buffers, its name in the report); forward: what it
// computes.
at::Tensor block(const std::shared_ptr<torch::nn::Module>& module, const TensorFunction& forward,
                 const at::Tensor& input);

template <typename Module>
requires detail::ModuleForm<Module> && requires(Module& m, const at::Tensor& x) {
  { detail::module_of(m).forward(x) } -> std::convertible_to<at::Tensor>;
}
at::Tensor block(Module& module, const at::Tensor& input) {
  return block(
      detail::module_pointer(module),
      [keep = detail::module_keeper(module)](const at::Tensor& x) mutable -> at::Tensor {
        return (*keep).forward(x);
      },
      input);
}

// A ModuleList or ModuleDict item: fathom::block<BlockImpl>(layer, x).
template <typename Named = void>
at::Tensor block(const std::shared_ptr<torch::nn::Module>& item, const at::Tensor& input) {
  if constexpr (!detail::kTypeNamed<Named>) {
    static_assert(detail::kTypeNamed<Named>,
                  "fathom::block(layer, x): a ModuleList or ModuleDict item is a "
                  "std::shared_ptr<torch::nn::Module>, which has no forward to call; name its "
                  "type: fathom::block<YourBlockImpl>(layer, x)");
    return input;
  } else {
    auto typed = detail::typed_item<Named>(item, "fathom::block");
    return block(typed, input);
  }
}

}  // namespace fathom
