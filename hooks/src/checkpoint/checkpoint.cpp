#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <fathom/checkpoint.h>
#include <fathom/error.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/engine.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "checkpoint/chain_nesting.h"
#include "checkpoint/op_interception.h"
#include "offload/offload_unit.h"

namespace fathom {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// --- random number generators -------------------------------------------------------------------

struct RngState {
  at::Tensor cpu;
  std::vector<std::pair<c10::Device, at::Tensor>> devices;
};

at::Tensor generator_state(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(at::Generator gen, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// The CPU generator and those of the accelerators the inputs live on, as
// torch.utils.checkpoint does (it leaves other devices alone too).
RngState capture_rng(const std::vector<at::Tensor>& inputs) {
  RngState s;
  s.cpu = generator_state(at::detail::getDefaultCPUGenerator());
  for (const at::Tensor& t : inputs) {
    const c10::Device d = t.device();
    if (d.is_cpu() || d.is_meta()) continue;
    if (std::any_of(s.devices.begin(), s.devices.end(),
                    [&](const auto& e) { return e.first == d; }))
      continue;
    s.devices.emplace_back(d, generator_state(at::globalContext().defaultGenerator(d)));
  }
  return s;
}

void apply_rng(const RngState& s) {
  set_generator_state(at::detail::getDefaultCPUGenerator(), s.cpu);
  for (const auto& [device, state] : s.devices)
    set_generator_state(at::globalContext().defaultGenerator(device), state);
}

// Sets the forward's generator states for the recompute and puts back the current ones after, so
// the recompute neither changes the masks nor advances the training's random stream.
class RngReplay {
 public:
  explicit RngReplay(const RngState* forward) : active_(forward != nullptr) {
    if (!active_) return;
    now_.cpu = generator_state(at::detail::getDefaultCPUGenerator());
    for (const auto& [device, state] : forward->devices)
      now_.devices.emplace_back(device,
                                generator_state(at::globalContext().defaultGenerator(device)));
    apply_rng(*forward);
  }
  ~RngReplay() {
    if (active_) apply_rng(now_);
  }
  RngReplay(const RngReplay&) = delete;
  RngReplay& operator=(const RngReplay&) = delete;

 private:
  bool active_;
  RngState now_;
};

// --- autocast -----------------------------------------------------------------------------------

constexpr std::array<c10::DeviceType, 2> kAutocastDevices{c10::DeviceType::CPU,
                                                          c10::DeviceType::CUDA};

struct AutocastState {
  std::array<bool, kAutocastDevices.size()> enabled{};
  std::array<at::ScalarType, kAutocastDevices.size()> dtype{};
  bool cache_enabled = true;
  bool any() const { return std::find(enabled.begin(), enabled.end(), true) != enabled.end(); }
};

AutocastState capture_autocast() {
  AutocastState s;
  for (std::size_t i = 0; i < kAutocastDevices.size(); ++i) {
    s.enabled[i] = at::autocast::is_autocast_enabled(kAutocastDevices[i]);
    s.dtype[i] = at::autocast::get_autocast_dtype(kAutocastDevices[i]);
  }
  s.cache_enabled = at::autocast::is_autocast_cache_enabled();
  return s;
}

void apply_autocast(const AutocastState& s) {
  for (std::size_t i = 0; i < kAutocastDevices.size(); ++i) {
    at::autocast::set_autocast_enabled(kAutocastDevices[i], s.enabled[i]);
    at::autocast::set_autocast_dtype(kAutocastDevices[i], s.dtype[i]);
  }
  at::autocast::set_autocast_cache_enabled(s.cache_enabled);
}

// Backward runs with the autocast state of the backward() call (usually off): the recompute must
// run under the forward's, as `with torch.autocast(...)` would set it, cache included.
class AutocastReplay {
 public:
  explicit AutocastReplay(const AutocastState& forward)
      : now_(capture_autocast()), nested_(forward.any()) {
    apply_autocast(forward);
    if (nested_) at::autocast::increment_nesting();
  }
  ~AutocastReplay() {
    if (nested_ && at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    apply_autocast(now_);
  }
  AutocastReplay(const AutocastReplay&) = delete;
  AutocastReplay& operator=(const AutocastReplay&) = delete;

 private:
  AutocastState now_;
  bool nested_;
};

// --- module buffers (BatchNorm running statistics) -----------------------------------------------

// The recompute runs BatchNorm in training mode again, which would update its running statistics
// a second time: fathom copies the buffers before the recompute and puts them back after.
class BufferRestore {
 public:
  explicit BufferRestore(const std::vector<std::shared_ptr<torch::nn::Module>>& modules) {
    at::NoGradGuard no_grad;
    std::unordered_set<const void*> seen;
    for (const auto& m : modules) {
      for (const at::Tensor& b : m->buffers(/*recurse=*/true)) {
        if (!b.defined() || !seen.insert(b.unsafeGetTensorImpl()).second) continue;
        buffers_.emplace_back(b, b.clone());
      }
    }
  }
  ~BufferRestore() {
    at::NoGradGuard no_grad;
    for (auto& [live, copy] : buffers_) live.copy_(copy);
  }
  BufferRestore(const BufferRestore&) = delete;
  BufferRestore& operator=(const BufferRestore&) = delete;

 private:
  std::vector<std::pair<at::Tensor, at::Tensor>> buffers_;
};

// Watches the forward for batch_norm / instance_norm calls that update running statistics fathom
// was not told about: those it cannot protect in the recompute, so it refuses them.
class RunningStatsWatch {
 public:
  explicit RunningStatsWatch(const std::vector<std::shared_ptr<torch::nn::Module>>& modules)
      : outer_(current) {
    for (const auto& m : modules)
      for (const at::Tensor& b : m->buffers(/*recurse=*/true))
        if (b.defined() && b.has_storage()) known_.insert(b.storage().unsafeGetStorageImpl());
    handle_ =
        at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start).needsInputs(true).scopes(
            {at::RecordScope::FUNCTION}));
    current = this;
  }
  ~RunningStatsWatch() {
    at::removeCallback(handle_);
    current = outer_;
  }
  RunningStatsWatch(const RunningStatsWatch&) = delete;
  RunningStatsWatch& operator=(const RunningStatsWatch&) = delete;

  void check() const {
    if (offender_.empty()) return;
    throw Error(
        "fathom::checkpoint: the checkpointed function runs " + offender_ +
        " in training mode with running statistics of a module fathom was not told about; the "
        "recompute in backward would update those statistics a second time. Pass the module "
        "with fathom::CheckpointOptions().module(m) (fathom then restores its buffers after the "
        "recompute), checkpoint the module itself with fathom::checkpoint(m, x), or keep it out "
        "of the checkpoint");
  }

 private:
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    RunningStatsWatch* self = current;
    if (!self || !self->offender_.empty()) return nullptr;
    const std::string_view name = fn.name();
    if (name != "aten::batch_norm" && name != "aten::instance_norm") return nullptr;
    const auto inputs = fn.inputs();
    // batch_norm(input, weight, bias, running_mean, running_var, training, ...);
    // instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, ...)
    if (inputs.size() < 6 || !inputs[3].isTensor() || !inputs[5].isBool() || !inputs[5].toBool())
      return nullptr;
    const at::Tensor& running = inputs[3].toTensor();
    if (!running.defined() || !running.has_storage()) return nullptr;
    if (!self->known_.count(running.storage().unsafeGetStorageImpl()))
      self->offender_ = std::string(name);
    return nullptr;
  }

  static thread_local RunningStatsWatch* current;
  RunningStatsWatch* outer_;
  at::CallbackHandle handle_ = at::INVALID_CALLBACK_HANDLE;
  std::unordered_set<const void*> known_;
  std::string offender_;
};

thread_local RunningStatsWatch* RunningStatsWatch::current = nullptr;

// --- the autograd function ----------------------------------------------------------------------

struct CheckpointState : torch::CustomClassHolder {
  TensorsFunction fn;
  std::vector<std::shared_ptr<torch::nn::Module>> modules;
  std::optional<RngState> rng;
  AutocastState autocast;
  std::size_t inputs = 0;
  std::size_t parameters = 0;
  // Selective checkpointing: the policy, and what the forward ran and kept (null: a plain
  // checkpoint, every op recomputed).
  CheckpointOptions policy;
  std::shared_ptr<detail::OpLog> log;
  // The storages of the kept outputs chosen Offload (and of the inputs, offload_inputs), from the
  // forward's end until autograd has saved them (the offload scope around the function takes
  // only these).
  std::unordered_set<const c10::StorageImpl*> offload;
};

// Runs the function with this checkpoint's op interception: recording the forward or replaying
// it for a selective checkpoint; for a plain one inside a selective one, out of the outer's log.
std::vector<at::Tensor> run_intercepted(CheckpointState& state, detail::InterceptMode mode,
                                        const std::vector<at::Tensor>& inputs) {
  if (state.log) {
    detail::OpInterception intercept(state.log.get(), mode, &state.policy);
    return state.fn(inputs);
  }
  if (detail::intercepting()) {
    detail::OpInterception pass(nullptr, mode, nullptr);
    return state.fn(inputs);
  }
  return state.fn(inputs);
}

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<CheckpointState> state,
                               at::TensorList inputs, at::TensorList /*parameters*/) {
    std::vector<at::Tensor> outputs;
    {
      detail::ChainNesting nested;
      RunningStatsWatch watch(state->modules);
      outputs = run_intercepted(*state, detail::InterceptMode::Record, inputs.vec());
      watch.check();
    }
    // The kept outputs are saved for backward beside the inputs: through autograd, so saved-tensor
    // hooks (fathom's meter, offloading) see them as they see any saved tensor.
    std::vector<at::Tensor> saved = inputs.vec();
    if (state->log) {
      std::vector<std::string> demoted;
      std::vector<bool> offload;
      std::vector<at::Tensor> kept = state->log->take_kept(&demoted, &offload);
      for (std::size_t i = 0; i < kept.size(); ++i) {
        if (offload[i] && kept[i].has_storage())
          state->offload.insert(kept[i].storage().unsafeGetStorageImpl());
        saved.push_back(std::move(kept[i]));
      }
      if (!demoted.empty()) {
        TORCH_WARN_ONCE(
            "fathom::checkpoint (selective): the checkpointed function changes the "
            "output of ",
            demoted.front(),
            " in place after it ran, so backward recomputes that op instead of "
            "keeping its output (",
            demoted.size(), " such ops)");
      }
    }
    ctx->save_for_backward(saved);
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i].defined())
        throw Error("fathom::checkpoint: output " + std::to_string(i) +
                    " of the checkpointed function is undefined; return defined tensors only");
      if (!at::isFloatingType(outputs[i].scalar_type()) &&
          !at::isComplexType(outputs[i].scalar_type()))
        ctx->mark_non_differentiable({outputs[i]});
    }
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    if (!torch::autograd::Engine::get_default_engine().is_checkpoint_valid()) {
      throw Error(
          "fathom::checkpoint cannot run under torch::autograd::grad() or backward() with "
          "`inputs`: "
          "its recompute runs a backward of its own that accumulates into .grad, so the gradients "
          "would not reach your grad() call (the limit of a reentrant checkpoint, as in PyTorch). "
          "Call loss.backward() without inputs and read .grad, or leave this part outside the "
          "checkpoint");
    }
    auto state =
        c10::static_intrusive_pointer_cast<CheckpointState>(ctx->saved_data["state"].toCapsule());
    // Before autograd unpacks them (its own check would not name the op).
    if (state->log) state->log->check_versions();
    const variable_list saved = ctx->get_saved_variables();
    std::vector<at::Tensor> inputs;
    inputs.reserve(state->inputs);
    for (std::size_t i = 0; i < state->inputs && i < saved.size(); ++i)
      inputs.push_back(saved[i].detach().requires_grad_(saved[i].requires_grad()));
    if (state->log)
      state->log->restore_kept(std::vector<at::Tensor>(
          saved.begin() + static_cast<std::ptrdiff_t>(inputs.size()), saved.end()));
    // Restored after the recompute's backward too: BatchNorm saves its running statistics for
    // backward, and putting them back earlier would bump their version under the saved copies.
    BufferRestore buffers(state->modules);
    std::vector<at::Tensor> outputs;
    {
      RngReplay rng(state->rng ? &*state->rng : nullptr);
      AutocastReplay autocast(state->autocast);
      detail::ChainNesting nested;
      at::AutoGradMode grad_mode(true);
      outputs = run_intercepted(*state, detail::InterceptMode::Replay, inputs);
    }
    if (state->log) state->log->finish_replay();
    variable_list with_grad, grads;
    for (std::size_t i = 0; i < outputs.size() && i < grad_outputs.size(); ++i) {
      if (outputs[i].requires_grad()) {
        with_grad.push_back(outputs[i]);
        grads.push_back(grad_outputs[i]);
      }
    }
    if (with_grad.empty()) {
      throw Error(
          "fathom::checkpoint: in the recompute no output of the checkpointed function requires "
          "grad, so there is nothing to backpropagate; the function must compute its outputs from "
          "its inputs or from parameters that require grad");
    }
    torch::autograd::backward(with_grad, grads);
    variable_list result;
    result.reserve(1 + state->inputs + state->parameters);
    result.emplace_back();  // the state
    for (const at::Tensor& in : inputs)
      result.push_back(in.requires_grad() ? in.grad() : at::Tensor());
    // Parameters are inputs only to put the node in the graph: the recompute's backward has
    // accumulated into their .grad already.
    for (std::size_t i = 0; i < state->parameters; ++i) result.emplace_back();
    return result;
  }
};

}  // namespace

std::vector<at::Tensor> detail::checkpoint_tensors(const TensorsFunction& fn,
                                                   const std::vector<at::Tensor>& inputs,
                                                   const CheckpointOptions& options) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw Error("fathom::checkpoint: input " + std::to_string(i) +
                  " is undefined; pass defined tensors (non-tensor arguments go in the function's "
                  "captures)");
  }
  if (!fn) throw Error("fathom::checkpoint: the function is empty");
  if (!at::GradMode::is_enabled()) {  // nothing to keep: no graph is recorded
    detail::ChainNesting nested;
    return fn(inputs);
  }
  auto state = c10::make_intrusive<CheckpointState>();
  state->fn = fn;
  state->modules = options.modules();
  if (options.selective()) {
    state->policy = options;
    state->log = std::make_shared<detail::OpLog>();
  }
  if (options.preserve_rng_state()) state->rng = capture_rng(inputs);
  state->autocast = capture_autocast();
  std::vector<at::Tensor> parameters;
  std::unordered_set<const void*> seen;
  for (const auto& m : options.modules()) {
    if (!m) throw Error("fathom::checkpoint: CheckpointOptions::module was given an empty module");
    for (const at::Tensor& p : m->parameters(/*recurse=*/true))
      if (p.requires_grad() && seen.insert(p.unsafeGetTensorImpl()).second) parameters.push_back(p);
  }
  state->inputs = inputs.size();
  state->parameters = parameters.size();
  const bool any_grad = std::any_of(inputs.begin(), inputs.end(),
                                    [](const at::Tensor& t) { return t.requires_grad(); });
  if (!any_grad && parameters.empty()) {
    TORCH_WARN_ONCE(
        "fathom::checkpoint: no input requires grad and no module was named, so the checkpointed "
        "part gets no gradients; name its modules with fathom::CheckpointOptions().module(m)");
  }
  if (!options.choice_policy() && !options.offload_inputs())
    return CheckpointFunction::apply(state, at::TensorList(inputs), at::TensorList(parameters));
  if (options.offload_inputs())
    for (const at::Tensor& t : inputs)
      if (t.has_storage()) state->offload.insert(t.storage().unsafeGetStorageImpl());
  // Outputs chosen Offload: autograd saves the kept outputs once the forward has returned, inside
  // apply, where this scope takes the chosen ones to host memory.
  OffloadOptions offload = options.offload_options();
  offload.only([state](const at::Tensor& t) {
    return t.has_storage() && state->offload.count(t.storage().unsafeGetStorageImpl()) > 0;
  });
  detail::OffloadScope scope(offload);
  std::vector<at::Tensor> outputs =
      CheckpointFunction::apply(state, at::TensorList(inputs), at::TensorList(parameters));
  state->offload.clear();
  scope.finish(outputs);
  return outputs;
}

at::Tensor checkpoint(const TensorFunction& fn, const at::Tensor& input,
                      const CheckpointOptions& options) {
  if (!fn) throw Error("fathom::checkpoint: the function is empty");
  // Copied: backward runs the function again after this call has returned.
  auto outputs = detail::checkpoint_tensors(
      [fn](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{fn(in[0])}; },
      std::vector<at::Tensor>{input}, options);
  return outputs.at(0);
}

}  // namespace fathom
