#pragma once
// The forms a LibTorch loop holds its modules in, as fathom::forward and fathom::block take them:
//   - a holder: a TORCH_MODULE of your own, torch::nn::Linear, torch::nn::LSTM;
//   - a std::shared_ptr to a module class: std::make_shared<Net>();
//   - the module object itself: `struct Net : torch::nn::Module {...}; Net model;`, the style of
//     the official LibTorch examples;
//   - a ModuleList or ModuleDict item, a std::shared_ptr<torch::nn::Module>: it has no forward to
//     call until its type is named, fathom::block<BlockImpl>(layer, x) (or the holder's name,
//     fathom::block<Block>(layer, x)); a wrong name is a fathom::Error naming the item's type.
#include <c10/util/Type.h>
#include <fathom/error.h>
#include <torch/nn/module.h>

#include <concepts>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>

namespace fathom::detail {

template <typename T>
struct SharedModulePointer : std::false_type {};
template <typename M>
requires std::derived_from<M, torch::nn::Module>
struct SharedModulePointer<std::shared_ptr<M>> : std::true_type {
};

template <typename T>
concept ModuleObject = std::derived_from<std::remove_cv_t<T>, torch::nn::Module>;
template <typename T>
concept ModulePointer = SharedModulePointer<std::remove_cv_t<T>>::value;
template <typename T>
concept ModuleHolder = !ModuleObject<T> && !ModulePointer<T> && requires(T & h) {
  h.ptr();
  *h;
};
template <typename T>
concept ModuleForm = ModuleObject<T> || ModulePointer<T> || ModuleHolder<T>;

// The module object of any form.
template <ModuleForm T>
decltype(auto) module_of(T& m) {
  if constexpr (ModuleObject<T>)
    return (m);
  else
    return (*m);
}

// The pointer fathom's chains and checkpoints keep: the one that owns the module or, for an
// object no shared_ptr owns (a local `Net model;`), one that does not own it. Such an object
// outlives the step's backward, as any module a loop trains does.
template <ModuleForm T>
std::shared_ptr<torch::nn::Module> module_pointer(T& m) {
  if constexpr (ModuleObject<T>) {
    if (auto owner = m.weak_from_this().lock()) return owner;
    return std::shared_ptr<torch::nn::Module>(std::shared_ptr<torch::nn::Module>(), &m);
  } else if constexpr (ModulePointer<T>) {
    return m;
  } else {
    return std::static_pointer_cast<torch::nn::Module>(m.ptr());
  }
}

// What a forward closure keeps to call the module: a copy of the holder or pointer (backward's
// recompute runs it after the call returned), or the object's address.
template <ModuleForm T>
auto module_keeper(T& m) {
  if constexpr (ModuleObject<T>)
    return &m;
  else
    return m;
}

// A holder's module class (ModuleHolder::ContainedType), or the class itself.
template <typename T>
struct ModuleClassOf {
  using type = T;
};
template <typename T>
requires requires { typename T::ContainedType; }
struct ModuleClassOf<T> {
  using type = typename T::ContainedType;
};

template <typename T>
inline constexpr bool kTypeNamed = !std::is_void_v<T>;

// A ModuleList or ModuleDict item as the module class the loop names for it.
template <typename Named>
std::shared_ptr<typename ModuleClassOf<Named>::type> typed_item(
    const std::shared_ptr<torch::nn::Module>& item, const char* call) {
  using Class = typename ModuleClassOf<Named>::type;
  static_assert(std::derived_from<Class, torch::nn::Module>,
                "fathom: name a module class or holder, e.g. fathom::block<BlockImpl>(layer, x)");
  if (!item)
    throw Error(std::string(call) + ": the module is empty; pass a module the list or dict holds");
  auto typed = std::dynamic_pointer_cast<Class>(item);
  if (!typed)
    throw Error(std::string(call) + "<" + c10::demangle(typeid(Named).name()) + ">: the module " +
                "is a " + item->name() + ", not a " + c10::demangle(typeid(Class).name()) +
                "; name its own type: " + call + "<" + item->name() + ">(layer, x)");
  return typed;
}

}  // namespace fathom::detail
