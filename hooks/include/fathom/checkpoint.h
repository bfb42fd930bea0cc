#pragma once
// Activation checkpointing for LibTorch (which has none: pytorch issue 52744), in the reentrant
// style of torch.utils.checkpoint: the forward keeps only the inputs and runs without recording a
// graph; backward runs the function again with grad enabled and backpropagates through it.
//
//   // a module (Linear, a Sequential...):
//   auto y = fathom::checkpoint(block, x);
//   // any function of tensors:
//   auto outs = fathom::checkpoint(
//       [&](const std::vector<at::Tensor>& in) { return std::vector{f(in[0], in[1], scale)}; },
//       {a, b}, fathom::CheckpointOptions().module(block));
//
// What the recompute replays exactly: the random numbers (the CPU generator and those of the CUDA
// devices the inputs live on are set to their state at the forward, then restored, so dropout
// draws the same mask), and the autocast state of the forward (enabled and dtype per device
// type). Gradients are bit for bit those of the plain run on deterministic kernels.
//
// What cannot work, and is refused with a fathom::Error:
// - torch::autograd::grad(), or backward() with `inputs`, through a checkpoint: the recompute
//   runs a backward of its own that accumulates into .grad, so the gradients would not reach
//   your grad() call (the limitation of PyTorch's reentrant checkpoint). Use loss.backward().
// - BatchNorm (or InstanceNorm with running statistics) in training mode inside a function whose
//   modules fathom was not told about: the recompute would update the running statistics a second
//   time. Name the modules (CheckpointOptions::module): fathom then restores their buffers after
//   the recompute, so the statistics are updated once, as in the plain run.
//
// Selective checkpointing (CheckpointOptions::keep, keep_if): inside the checkpoint a policy
// decides, op by op, which outputs the forward keeps; backward recomputes the rest and returns
// the kept ones instead of running their kernels again. Keep what is expensive to recompute and
// cheap to hold (matrix products, convolutions, attention: expensive_ops()), recompute the
// pointwise ops, norms and views around them, as torchtitan does with PyTorch's
// create_selective_checkpoint_contexts:
//
//   auto y = fathom::checkpoint(fn, x, fathom::CheckpointOptions().module(block)
//                                          .keep(fathom::expensive_ops()));
//   // or by fathom's FLOP count of each call:
//   ... .keep_if([](const fathom::CheckpointedOp& op) { return op.flops >= (1 << 20); })
//
// Keep, recompute or offload, op by op (CheckpointOptions::choose): an op chosen Offload keeps its
// outputs as Keep does, but in host memory, through fathom::offload's path (offload.h; pinned
// memory and a side stream on a GPU, OffloadOptions from CheckpointOptions::offload_options), and
// they come back before the recompute needs them. This is the per-tensor choice of fathom's joint
// activation planner (activation_plan.h), which FATHOM_MODE=auto applies by itself:
//
//   ... .choose([](const fathom::CheckpointedOp& op) {
//     return op.flops > 0 ? fathom::OpChoice::Offload : fathom::OpChoice::Recompute;
//   })
//
// Ops are the ones autograd records (below it at the dispatcher, after composites such as
// aten::linear or aten::conv2d have decomposed); the recompute must run them in the same order,
// which fathom checks op by op (a fathom::Error names both ops otherwise). A kept output changed
// in place between the forward and backward is a fathom::Error naming the op; one the function
// itself changes in place (a ReLU(inplace) after a kept convolution) is recomputed instead.
// Ops that return views or change their inputs in place are always recomputed.
//
// Not supported: functions that modify their inputs in place (the saved input would no longer be
// the forward's; autograd reports it at backward), and nested backward through the checkpoint
// (create_graph).
#include <ATen/core/Tensor.h>
#include <fathom/module_forms.h>
#include <fathom/offload.h>
#include <torch/nn/module.h>

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace fathom {

// An op that ran inside a selectively checkpointed function, as a keep policy sees it: after its
// kernel ran in the forward.
struct CheckpointedOp {
  std::string_view name;      // "aten::addmm"
  std::string_view overload;  // "" for the default overload
  // fathom's FLOP count of the call (the FLOP counter's formulas; 0 for ops without one).
  std::int64_t flops = 0;
  std::int64_t output_bytes = 0;  // what keeping it holds
  // Its position among the ops the function ran (from 0): the same in every call of a function
  // that runs the same ops.
  int index = 0;
};
using KeepPolicy = std::function<bool(const CheckpointedOp&)>;

// What becomes of an op's outputs in a selective checkpoint: recomputed in backward, kept on the
// device, or kept in host memory (offloaded) and brought back for the recompute.
enum class OpChoice { Recompute, Keep, Offload };
using OpChoicePolicy = std::function<OpChoice(const CheckpointedOp&)>;

// The ops worth keeping: matrix products, convolutions and fused attention, the ones whose
// recompute costs FLOPs (aten::mm, addmm, bmm, baddbmm, convolution, the
// _scaled_dot_product_*_attention kernels).
const std::vector<std::string>& expensive_ops();

using TensorsFunction = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;
using TensorFunction = std::function<at::Tensor(const at::Tensor&)>;

class CheckpointOptions {
 public:
  // Replay the forward's random numbers in the recompute (default on). Off skips copying the
  // generator states, but dropout then draws a different mask in the recompute.
  CheckpointOptions& preserve_rng_state(bool v) {
    preserve_rng_state_ = v;
    return *this;
  }
  bool preserve_rng_state() const noexcept { return preserve_rng_state_; }

  // A module the function runs. Its parameters become inputs of the checkpoint's autograd node,
  // so the checkpointed part gets gradients even when no input requires grad (the first block of
  // a network: its input is data); its buffers are restored after the recompute.
  CheckpointOptions& module(std::shared_ptr<torch::nn::Module> m) {
    modules_.push_back(std::move(m));
    return *this;
  }
  template <typename ModuleHolder>
  requires requires(const ModuleHolder& h) { h.ptr(); }
  CheckpointOptions& module(const ModuleHolder& m) {
    return module(std::static_pointer_cast<torch::nn::Module>(m.ptr()));
  }
  const std::vector<std::shared_ptr<torch::nn::Module>>& modules() const noexcept {
    return modules_;
  }

  // Selective checkpointing: the outputs of these ops ("aten::mm", or "aten::add.Tensor" for one
  // overload) are kept, the rest recomputed. Throws fathom::Error for a name that fathom never
  // sees run (an unknown op, a composite such as aten::linear, an in-place or view op).
  CheckpointOptions& keep(const std::vector<std::string>& ops);
  // Selective checkpointing by a predicate, called once per op in the forward; an op is kept
  // when keep() names it or the predicate says so.
  CheckpointOptions& keep_if(KeepPolicy policy);
  // Selective checkpointing with offloading: the policy decides each op's choice, called once per
  // op in the forward. An op keep() or keep_if() keeps is kept whatever it says.
  CheckpointOptions& choose(OpChoicePolicy policy);
  // How the outputs chosen Offload travel (min_bytes, the meter, cpu_copy; not `only`, which
  // fathom sets to the chosen outputs).
  CheckpointOptions& offload_options(OffloadOptions options) {
    offload_options_ = std::move(options);
    return *this;
  }
  const OffloadOptions& offload_options() const noexcept { return offload_options_; }
  // The inputs, which the checkpoint holds for its recompute, go to host memory too (and come
  // back for the recompute), as the outputs chosen Offload do.
  CheckpointOptions& offload_inputs(bool v) {
    offload_inputs_ = v;
    return *this;
  }
  bool offload_inputs() const noexcept { return offload_inputs_; }
  const std::vector<std::string>& kept_ops() const noexcept { return keep_; }
  const KeepPolicy& keep_policy() const noexcept { return keep_if_; }
  const OpChoicePolicy& choice_policy() const noexcept { return choose_; }
  bool selective() const noexcept {
    return !keep_.empty() || static_cast<bool>(keep_if_) || static_cast<bool>(choose_);
  }
  // A policy reads the op's FLOPs or size (keep_if, choose): fathom counts them for it.
  bool has_predicate() const noexcept {
    return static_cast<bool>(keep_if_) || static_cast<bool>(choose_);
  }
  OpChoice choice(const CheckpointedOp& op) const;
  bool keeps(const CheckpointedOp& op) const { return choice(op) != OpChoice::Recompute; }

 private:
  bool preserve_rng_state_ = true;
  std::vector<std::shared_ptr<torch::nn::Module>> modules_;
  std::vector<std::string> keep_;
  KeepPolicy keep_if_;
  OpChoicePolicy choose_;
  OffloadOptions offload_options_;
  bool offload_inputs_ = false;
};

namespace detail {
template <typename T>
concept ModuleHolderLike = requires(const T& h) {
  h.ptr();
};
std::vector<at::Tensor> checkpoint_tensors(const TensorsFunction& fn,
                                           const std::vector<at::Tensor>& inputs,
                                           const CheckpointOptions& options);
}  // namespace detail

// Runs fn(inputs) without keeping its activations; backward recomputes them. Non-tensor
// arguments travel in fn's captures. Every input must be defined. (A template only so that a
// module holder, callable with one tensor, never has to be tried as a function of several.)
template <typename F>
requires(!detail::ModuleHolderLike<std::remove_cvref_t<F>> &&
         std::convertible_to<F, TensorsFunction>)
    std::vector<at::Tensor> checkpoint(F&& fn, const std::vector<at::Tensor>& inputs,
                                       const CheckpointOptions& options = CheckpointOptions()) {
  return detail::checkpoint_tensors(TensorsFunction(std::forward<F>(fn)), inputs, options);
}

at::Tensor checkpoint(const TensorFunction& fn, const at::Tensor& input,
                      const CheckpointOptions& options = CheckpointOptions());

// A module whose forward takes and returns one tensor, in any form (module_forms.h): a
// Sequential (a segment of a network), a block of your own (a TORCH_MODULE holder, a shared_ptr,
// the object), a ModuleList item with its type named (fathom::checkpoint<BlockImpl>(layer, x)).
template <typename Module>
requires detail::ModuleForm<Module> && requires(Module& m, const at::Tensor& x) {
  { detail::module_of(m).forward(x) } -> std::convertible_to<at::Tensor>;
}
at::Tensor checkpoint(Module& module, const at::Tensor& input) {
  // The holder or pointer is copied (it shares the module): backward runs it again after this
  // call returned.
  return checkpoint([keep = detail::module_keeper(module)](
                        const at::Tensor& x) mutable -> at::Tensor { return (*keep).forward(x); },
                    input, CheckpointOptions().module(detail::module_pointer(module)));
}

template <typename Named = void>
at::Tensor checkpoint(const std::shared_ptr<torch::nn::Module>& item, const at::Tensor& input) {
  if constexpr (!detail::kTypeNamed<Named>) {
    static_assert(detail::kTypeNamed<Named>,
                  "fathom::checkpoint(layer, x): a ModuleList or ModuleDict item is a "
                  "std::shared_ptr<torch::nn::Module>, which has no forward to call; name its "
                  "type: fathom::checkpoint<YourBlockImpl>(layer, x)");
    return input;
  } else {
    auto typed = detail::typed_item<Named>(item, "fathom::checkpoint");
    return checkpoint(typed, input);
  }
}

}  // namespace fathom
