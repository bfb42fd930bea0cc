#pragma once
// Activation offloading for LibTorch (torch.autograd.graph.save_on_cpu and torchtune's activation
// offloading are Python only): while a unit's forward runs, every tensor autograd saves for
// backward (its storage, at least OffloadOptions::min_bytes; parameters never) is copied to
// pinned host memory on a side CUDA stream, and the device memory goes back to the allocator once
// the copy is done (the caching allocator holds the block until the side stream has read it).
// In backward the tensors come back on another side stream, one unit ahead: when the backward of
// a unit starts, the tensors of the unit that ran before it start coming back (up to
// prefetch_ahead_bytes, the last saved first), so the copy overlaps this unit's backward; compute
// waits on the copy's event, never reads a half copy.
//
//   auto y = fathom::offload(block, x);                      // a module
//   auto y = fathom::offload([&](const at::Tensor& t) { return f(t); }, x,
//                            fathom::OffloadOptions().min_bytes(1 << 20).meter(meter));
//
// What it costs: no recompute, the link's time (each byte crosses it twice) where compute does
// not hide it, pinned host memory for what is offloaded, and one copy of the tensor on the device
// again during its unit's backward and the one after it. Gradients are bit for bit those of the
// plain run: the bytes come back as they left, views and strides included.
//
// Falling back: where there is nothing to gain or nothing to offload with (tensors on the CPU,
// another device type, pinned memory or a side stream failing, fathom's autograd-engine hook not
// installable) the saved tensors are kept as autograd keeps them, the training goes on, a
// fathom warning says why (the session's warnings handler gets it), and the meter's summary
// names the reason. OffloadOptions::cpu_copy(true) runs the whole path on the CPU instead (the
// "host copy" a separate CPU buffer, freed and brought back as on a GPU): for tests and the
// benchmark, since on the CPU it frees nothing.
//
// Bad input: an in-place change to a saved tensor between the forward and its backward (the
// host copy would be stale) is a fathom::Error at backward that names the node needing the tensor,
// the one that made it and the in-place op, never a wrong gradient.
#include <ATen/core/Tensor.h>
#include <fathom/module_forms.h>
#include <torch/nn/module.h>

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace fathom {

namespace detail {
struct OffloadMeterState;
}

// What the offloaded calls sharing a meter moved, for the report's per-module table and the
// planner's link model (activation_plan.h: ActivationPlanOptions::link_bytes_per_second).
struct OffloadSummary {
  std::int64_t calls = 0;              // forwards run under offload
  std::int64_t offloaded_tensors = 0;  // storages copied out
  std::int64_t offloaded_bytes = 0;    // their bytes (each crosses the link twice)
  std::int64_t kept_tensors = 0;       // saved and kept: small, parameters, or a fallback
  std::int64_t kept_bytes = 0;         // (parameters not counted: they are not activations)
  std::int64_t prefetched = 0;  // brought back one unit ahead (when the next unit's backward began)
  std::int64_t fetched_late =
      0;  // brought back at their own unit's backward (the last unit) or use
  // Device events around each copy (a GPU; 0 on the CPU path, which is not a link).
  std::int64_t timed_copies = 0;
  double to_host_ms = 0;
  double to_device_ms = 0;
  double backward_wait_ms = 0;  // compute stalled on copies not back yet: the part not hidden
  std::string fallback;         // why tensors were kept instead of offloaded; "" when none were
  // Bytes over copy time, both ways; 0 when no copy was timed.
  double link_bytes_per_second() const noexcept {
    const double ms = to_host_ms + to_device_ms;
    return ms > 0 ? 2.0 * static_cast<double>(offloaded_bytes) / (ms / 1e3) : 0.0;
  }
};

// Collects what offloaded calls moved; copies share it (pass one per module for per-module
// numbers, or one for the model).
class OffloadMeter {
 public:
  OffloadMeter();
  // Waits for the copies already started and sums them up.
  OffloadSummary summary() const;
  const std::shared_ptr<detail::OffloadMeterState>& state() const noexcept { return state_; }

 private:
  std::shared_ptr<detail::OffloadMeterState> state_;
};

class OffloadOptions {
 public:
  // Storages smaller than this stay on the device (a copy costs more than it frees).
  OffloadOptions& min_bytes(std::int64_t v) {
    min_bytes_ = v;
    return *this;
  }
  std::int64_t min_bytes() const noexcept { return min_bytes_; }
  // Runs the offload path for tensors on the CPU too (copies to a separate buffer): tests.
  OffloadOptions& cpu_copy(bool v) {
    cpu_copy_ = v;
    return *this;
  }
  bool cpu_copy() const noexcept { return cpu_copy_; }
  OffloadOptions& meter(OffloadMeter m) {
    meter_ = std::move(m);
    return *this;
  }
  const std::optional<OffloadMeter>& meter() const noexcept { return meter_; }
  // Offloads only the saved tensors the predicate accepts (called at each save, in the forward);
  // the rest stay as autograd keeps them. Unset: every saved tensor of min_bytes or more.
  OffloadOptions& only(std::function<bool(const at::Tensor&)> accept) {
    only_ = std::move(accept);
    return *this;
  }
  const std::function<bool(const at::Tensor&)>& only() const noexcept { return only_; }
  // Of this unit's offloaded bytes, at most this many come back ahead (while the backward of the
  // unit after it runs); the rest come back when its own backward starts, where the copy is not
  // hidden. The prefetch then never adds more than this to the memory of the backward before
  // it: a plan sets it to what its budget leaves free there. Below 0 (the default): no limit.
  OffloadOptions& prefetch_ahead_bytes(std::int64_t v) {
    prefetch_ahead_bytes_ = v;
    return *this;
  }
  std::int64_t prefetch_ahead_bytes() const noexcept { return prefetch_ahead_bytes_; }
  // How its own backward brings the unit's tensors back. Below 0 (the default): all of them when
  // its backward begins, which hides the most copy time and holds them all at once. n >= 0: in
  // the order backward uses them (the last saved first), at most n tensors back ahead of the one
  // backward is using, each next one started as the one before it is first used (torchtune's
  // activation offloading fetches so, one ahead): the unit then holds n + 1 of its tensors at a
  // time, not all, and a copy is hidden only behind the backward of the tensor before it. A plan
  // that offloads a unit's groups without recomputing it uses 1 (activation_plan.h: the fetch
  // window). The prefetch one unit ahead brings back at most n + 1 too.
  OffloadOptions& fetch_ahead(int n) {
    fetch_ahead_ = n;
    return *this;
  }
  int fetch_ahead() const noexcept { return fetch_ahead_; }
  // The unit's name in fallback warnings.
  OffloadOptions& name(std::string v) {
    name_ = std::move(v);
    return *this;
  }
  const std::string& name() const noexcept { return name_; }

 private:
  std::int64_t min_bytes_ = std::int64_t{1} << 20;
  std::int64_t prefetch_ahead_bytes_ = -1;
  int fetch_ahead_ = -1;
  bool cpu_copy_ = false;
  std::optional<OffloadMeter> meter_;
  std::string name_;
  std::function<bool(const at::Tensor&)> only_;
};

using OffloadFunction = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

namespace detail {
template <typename T>
concept OffloadHolderLike = requires(const T& h) {
  h.ptr();
};
std::vector<at::Tensor> offload_tensors(const OffloadFunction& fn,
                                        const std::vector<at::Tensor>& inputs,
                                        const OffloadOptions& options);
}  // namespace detail

// Runs fn(inputs) with what it saves for backward offloaded. Every input must be defined.
template <typename F>
requires(!detail::OffloadHolderLike<std::remove_cvref_t<F>> &&
         std::convertible_to<F, OffloadFunction>)
    std::vector<at::Tensor> offload(F&& fn, const std::vector<at::Tensor>& inputs,
                                    const OffloadOptions& options = OffloadOptions()) {
  return detail::offload_tensors(OffloadFunction(std::forward<F>(fn)), inputs, options);
}

at::Tensor offload(const std::function<at::Tensor(const at::Tensor&)>& fn, const at::Tensor& input,
                   const OffloadOptions& options = OffloadOptions());

// A module whose forward takes and returns one tensor, in any form (module_forms.h).
template <typename Module>
requires detail::ModuleForm<Module> && requires(Module& m, const at::Tensor& x) {
  { detail::module_of(m).forward(x) } -> std::convertible_to<at::Tensor>;
}
at::Tensor offload(Module& module, const at::Tensor& input,
                   const OffloadOptions& options = OffloadOptions()) {
  auto& m = detail::module_of(module);
  return offload([&m](const at::Tensor& x) -> at::Tensor { return m.forward(x); }, input, options);
}

}  // namespace fathom
