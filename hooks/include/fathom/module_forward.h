#pragma once
// fathom::forward for any module form (module_forms.h: a holder such as a TORCH_MODULE of your
// own, a Linear, a Transformer; a std::shared_ptr to a module class; the module object itself;
// a ModuleList or ModuleDict item with its type named): runs module.forward(args...) inside the
// module's range and returns what it returns, with any number of arguments and any result (a
// tuple, a struct).
//
//   auto logits = fathom::forward(model, x);          // instead of model->forward(x)
//   auto [out, state] = fathom::forward(lstm, x, h);  // several arguments, a tuple back
//   auto y = fathom::forward<HeadImpl>(heads["cls"], x);  // a ModuleDict item
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
#include <fathom/module_forms.h>
#include <fathom/session.h>
#include <torch/nn/modules/container/sequential.h>

#include <concepts>
#include <memory>
#include <type_traits>
#include <utility>

namespace fathom {

namespace detail {

template <typename M, typename... Args>
concept ModuleCall =
    ModuleForm<M> && !std::same_as<std::remove_cvref_t<M>, torch::nn::Sequential> &&
    requires(M & m, Args&&... a) {
  module_of(m).forward(std::forward<Args>(a)...);
};

// One tensor in, one tensor out: what fathom::block measures and may checkpoint.
template <typename M, typename... Args>
concept TensorBlockCall = sizeof...(Args) == 1 &&
                          (std::convertible_to<Args, const at::Tensor&> && ...) &&
                          requires(M& m, const at::Tensor& x) {
  { module_of(m).forward(x) } -> std::convertible_to<at::Tensor>;
};

}  // namespace detail

template <typename Module, typename... Args>
requires detail::ModuleCall<Module, Args...>
auto forward(Module& module, Args&&... args) {
  // Under Auto's mixed precision a module that throws (an op with no 16-bit kernel) runs again in
  // fp32 (amp.h): its arguments are passed as lvalues so the second run still has them.
  if constexpr (detail::TensorBlockCall<Module, Args...>) {
    return detail::amp_region(
        [&] { return block(module, static_cast<const at::Tensor&>(args)...); });
  } else if constexpr (requires { detail::module_of(module).forward(args...); }) {
    ModuleScope range(detail::module_of(module));
    return detail::amp_region([&] { return detail::module_of(module).forward(args...); });
  } else {
    ModuleScope range(detail::module_of(module));
    return detail::module_of(module).forward(std::forward<Args>(args)...);
  }
}

// A ModuleList or ModuleDict item: fathom::forward<HeadImpl>(heads["cls"], x).
template <typename Named = void, typename... Args>
auto forward(const std::shared_ptr<torch::nn::Module>& item, Args&&... args) {
  if constexpr (!detail::kTypeNamed<Named>) {
    static_assert(detail::kTypeNamed<Named>,
                  "fathom::forward(item, x): a ModuleList or ModuleDict item is a "
                  "std::shared_ptr<torch::nn::Module>, which has no forward to call; name its "
                  "type: fathom::forward<YourModuleImpl>(item, x)");
  } else {
    auto typed = detail::typed_item<Named>(item, "fathom::forward");
    return forward(typed, std::forward<Args>(args)...);
  }
}

}  // namespace fathom
