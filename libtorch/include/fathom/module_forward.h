#pragma once
// fathom::forward for any module holder (a TORCH_MODULE of your own, a Linear, a Transformer):
// runs module->forward(args...) inside the module's range and returns what it returns, with
// any number of arguments and any result (a tuple, a struct).
//
//   auto logits = fathom::forward(model, x);          // instead of model->forward(x)
//   auto [out, state] = fathom::forward(lstm, x, h);  // several arguments, a tuple back
//
// A module that takes one tensor and returns one is run as a fathom::block (block.h): in the
// session's profiled steps fathom measures what it saves for backward (the report's activation
// bytes) and Auto mode may checkpoint it. Other signatures get the range only: fathom cannot
// checkpoint or split a call it cannot replay. A Sequential goes through sequential.h instead,
// item by item.
//
// LibTorch modules have no forward hooks, so the children a custom module's forward calls are
// invisible to fathom: a range per child needs that child called through fathom::forward in the
// module's own forward, one line each (`x = fathom::forward(fc1, x);` for `x = fc1(x);`).
#include <fathom/amp.h>
#include <fathom/block.h>
#include <fathom/session.h>
#include <torch/nn/modules/container/sequential.h>

#include <concepts>
#include <type_traits>
#include <utility>

namespace fathom {

namespace detail {

template <typename H, typename... Args>
concept ModuleHolderCall =
    !std::same_as<std::remove_cvref_t<H>, torch::nn::Sequential> && requires(H & h, Args&&... a) {
  h.ptr();
  h->forward(std::forward<Args>(a)...);
};

// One tensor in, one tensor out: what fathom::block measures and may checkpoint.
template <typename H, typename... Args>
concept TensorBlockCall = sizeof...(Args) == 1 &&
                          (std::convertible_to<Args, const at::Tensor&> && ...) &&
                          requires(H& h, const at::Tensor& x) {
  { h->forward(x) } -> std::convertible_to<at::Tensor>;
};

}  // namespace detail

template <typename ModuleHolder, typename... Args>
requires detail::ModuleHolderCall<ModuleHolder, Args...>
auto forward(ModuleHolder& module, Args&&... args) {
  // Under Auto's mixed precision a module that throws (an op with no 16-bit kernel) runs again in
  // fp32 (amp.h): its arguments are passed as lvalues so the second run still has them.
  if constexpr (detail::TensorBlockCall<ModuleHolder, Args...>) {
    return detail::amp_region([&] { return block(module, static_cast<const at::Tensor&>(args)...); });
  } else if constexpr (requires { module->forward(args...); }) {
    ModuleScope range(*module);
    return detail::amp_region([&] { return module->forward(args...); });
  } else {
    ModuleScope range(*module);
    return module->forward(std::forward<Args>(args)...);
  }
}

}  // namespace fathom
