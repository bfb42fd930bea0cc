#include "amp/amp_extension.h"

#include <ATen/cuda/CUDAContextLight.h>
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/full.h>
#include <c10/core/GradMode.h>
#include <fathom/error.h>
#include <fathom/report.h>
#include <fathom/session.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <iostream>
#include <map>
#include <unordered_map>

#include "advise/advisor.h"
#include "analyze/amp_hardware.h"
#include "base/warning_sink.h"
#include "collect/clock.h"
#include "collect/host_info.h"
#include "framework/session_access.h"
#include "framework/session_state.h"

namespace fathom {
namespace detail {
namespace {

std::string lower_device_name(c10::DeviceType t) {
  return c10::DeviceTypeName(t, /*lower_case=*/true);
}

}  // namespace

AmpExtension::AmpExtension(Mode mode, std::optional<c10::Device> device)
    : mode_(mode), session_device_(device) {
  if (device && device->is_cuda()) {
    device_.cuda = true;
    try {
      const auto* p = at::cuda::getDeviceProperties(device->index());
      device_.device_name = p->name;
      device_.compute_major = p->major;
      device_.compute_minor = p->minor;
    } catch (const std::exception&) {
      // Leaves compute capability 0: the suggestion then says the GPU is not in the table.
    }
  }
  // Also for a CUDA session: a loss on the CPU makes autocast's device the CPU.
  try {
    device_.cpu_bf16_units = cpu_bf16_units_here(&device_.cpu_bf16_limit);
  } catch (const std::exception&) {
    // No units known: Auto then does not try bf16 on the CPU.
  }
  on_epoch_begin(0);
}

void AmpExtension::configure(const AmpOptions& options) {
  options_ = options;
  policy_ = AutoAmpPolicy(options.auto_options());
  device_type_.reset();
  dtype_.reset();
  scaler_.reset();
  always_failed_ = false;
  last_scale_.reset();
}

bool AmpExtension::prepare(std::string& why_not) {
  const c10::DeviceType type =
      options_.device_type() ? *options_.device_type()
      : loss_device_type_    ? *loss_device_type_
                             : (session_device_ ? session_device_->type() : c10::DeviceType::CPU);
  c10::ScalarType dtype;
  try {
    dtype = options_.dtype() ? *options_.dtype() : default_autocast_dtype(type);
    // Enter and leave once: a dtype or device autocast cannot use fails here, not in a forward.
    const AutocastState saved = enter_autocast(type, dtype, true);
    leave_autocast(type, saved);
  } catch (const std::exception& e) {
    why_not = e.what();
    return false;
  }
  if (dtype == c10::ScalarType::Half && options_.scaler().enabled()) {
    if (options_.when() == AmpOptions::When::Mode && (!loop_scales_ || !loop_applies_)) {
      why_not =
          "fp16 needs a GradScaler and the loop does not let fathom scale the loss: use "
          "step.scaled(loss).backward() and step.apply(optimizer)";
      return false;
    }
    scaler_.emplace(options_.scaler());
  }
  device_type_ = type;
  dtype_ = dtype;
  return true;
}

std::string AmpExtension::tried_on() const {
  if (*device_type_ == c10::DeviceType::CUDA)
    return device_.compute_major > 0
               ? " (compute capability " + std::to_string(device_.compute_major) + "." +
                     std::to_string(device_.compute_minor) + ")"
               : "";
  std::string units;
  for (const std::string& u : device_.cpu_bf16_units) units += (units.empty() ? "" : ", ") + u;
  return units.empty() ? " (no bf16 units: native_only is off)" : " (" + units + ")";
}

void AmpExtension::record(AmpEvent event) {
  if (event.kind == AmpEventKind::Enabled || event.kind == AmpEventKind::RolledBack ||
      event.kind == AmpEventKind::NotEnabled)
    detail::warn("mixed precision ", amp_event_kind_name(event.kind), " at step ", event.step, ": ",
                 event.detail);
  epoch_.events.push_back(std::move(event));
}

void AmpExtension::count_phase(Phase phase) {
  for (PhasePrecision& p : epoch_.phases) {
    if (p.phase != phase) continue;
    const bool low = phase != Phase::Optimizer && amp_this_step_;
    (low ? p.low_precision : p.fp32) += 1;
  }
}

void AmpExtension::note_scale() {
  const double s = scaler_->get_scale();
  const bool changed = last_scale_ && *last_scale_ != s;
  if (changed) ++epoch_.scale_changes;
  if (epoch_.scale_history.empty() || changed) {
    // Bounded: the epoch's first point stays, the oldest of the rest goes.
    if (epoch_.scale_history.size() >= kScaleHistoryLimit)
      epoch_.scale_history.erase(epoch_.scale_history.begin() + 1);
    epoch_.scale_history.push_back({global_step_, s});
  }
  last_scale_ = s;
}

bool AmpExtension::check_finite_gradients(torch::optim::Optimizer& optimizer) {
  c10::NoGradGuard no_grad;
  std::unordered_map<c10::Device, std::map<c10::ScalarType, std::vector<at::Tensor>>> grads;
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) {
        at::Tensor g = p.grad().is_sparse() ? p.grad()._values() : p.grad();
        grads[g.device()][g.scalar_type()].push_back(g);
      }
  double found = 0;
  for (auto& [device, by_dtype] : grads) {
    const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
    at::Tensor inf = at::full({}, 0.0, opts);
    const at::Tensor one = at::full({}, 1.0, opts);
    for (auto& [dtype, list] : by_dtype)
      at::_amp_foreach_non_finite_check_and_unscale_(list, inf, one);
    found += inf.item<double>();
  }
  return found == 0;
}

// --- what StepScope calls ----------------------------------------------------------------------

void AmpExtension::loss(const at::Tensor& loss) {
  loss_ = loss.detach();
  loss_device_type_ = loss.device().type();
}

at::Tensor AmpExtension::scaled(const at::Tensor& loss) {
  loop_scales_ = true;
  this->loss(loss);
  if (amp_this_step_ && scaler_) {
    scaled_this_step_ = true;
    return scaler_->scale(loss);
  }
  return loss;
}

void AmpExtension::unscale(torch::optim::Optimizer& optimizer) {
  if (amp_this_step_ && scaler_ && scaled_this_step_) scaler_->unscale_(optimizer);
}

bool AmpExtension::apply(torch::optim::Optimizer& optimizer) {
  loop_applies_ = true;
  if (amp_this_step_ && scaler_ && scaled_this_step_) {
    if (epoch_.scale_history.empty()) note_scale();  // the scale the epoch started with
    const bool stepped = scaler_->step(optimizer);
    scaler_->update();
    note_scale();
    if (!stepped) {
      ++epoch_.skipped_steps;
      nonfinite_this_step_ = true;
    }
    return stepped;
  }
  if (amp_this_step_ && !check_finite_gradients(optimizer)) {
    // bf16 has fp32's range: inf/NaN here is a fault, not calibration. Keep the weights clean.
    ++epoch_.skipped_steps;
    nonfinite_this_step_ = true;
    return false;
  }
  optimizer.step();
  return true;
}

bool AmpExtension::recover_failed_region(const char* what) noexcept {
  // saved_ is not empty inside a forward phase that entered autocast: outside one the error is
  // not autocast's.
  if (!auto_policy() || !amp_this_step_ || !device_type_ || !dtype_ || saved_.empty()) return false;
  try {
    leave_autocast(*device_type_, saved_.back());
    saved_.back() = enter_fp32_autocast(*device_type_);
    amp_this_step_ = false;
    upcast_this_step_ = true;  // the phase's end leaves the fp32 autocast
    record(policy_.fail(
        global_step_,
        "step " + std::to_string(global_step_) + ": a region of its forward (fathom::forward) " +
            "threw under " + std::string(short_dtype_name(*dtype_)) +
            " autocast, so mixed precision is off for good and the region ran again in fp32 " +
            "(under fp32 autocast, which casts up what 16-bit steps left behind); the error: " +
            what));
    return true;
  } catch (...) {
    detail::swallowed("amp/amp_extension.cpp");
    return false;
  }
}

bool AmpExtension::recover_failed_step(const std::string& what) {
  if (!pending_failure_ || *pending_failure_ >= epoch_.events.size()) return false;
  AmpEvent& ev = epoch_.events[*pending_failure_];
  pending_failure_.reset();
  const bool retry = !pending_failure_optimizer_began_;
  ev.detail += "; the error: " + what +
               (retry ? "; fathom::guarded_step ran the step again in fp32"
                      : "; rethrown: the optimizer phase had begun, and running the step again "
                        "could apply it twice");
  detail::warn("mixed precision: step ", ev.step,
               retry ? " runs again in fp32" : " is not run again (its optimizer phase had begun)");
  return retry;
}

// --- session callbacks -------------------------------------------------------------------------

void AmpExtension::on_epoch_begin(std::int64_t) noexcept {
  epoch_ = MixedPrecisionSummary{};
  epoch_.first_step = global_step_;
  epoch_.phases = {{Phase::Forward, 0, 0}, {Phase::Backward, 0, 0}, {Phase::Optimizer, 0, 0}};
}

void AmpExtension::on_step_begin(std::int64_t) noexcept {
  step_begin_ns_ = now_ns();
  optimizer_began_ = false;
  pending_failure_.reset();
  scaled_this_step_ = false;
  nonfinite_this_step_ = false;
  forward_this_step_ = region_this_step_ = guarded_this_step_ = false;
  loss_ = at::Tensor();
  bool on = false;
  switch (options_.when()) {
    case AmpOptions::When::Never:
      break;
    case AmpOptions::When::Always:
      if (!dtype_ && !always_failed_) {
        std::string why;
        try {
          if (!prepare(why)) {
            always_failed_ = true;
            record({global_step_, AmpEventKind::NotEnabled, why});
          }
        } catch (const std::exception& e) {
          always_failed_ = true;
          record({global_step_, AmpEventKind::NotEnabled, e.what()});
        }
      }
      on = dtype_.has_value() && !always_failed_;
      break;
    case AmpOptions::When::Mode:
      on = auto_policy() && policy_.amp_on() && dtype_.has_value();
      break;
  }
  amp_this_step_ = on;
  comparison_this_step_ = auto_policy() && dtype_.has_value() && policy_.comparison_step();
  upcast_this_step_ = !on && ran_low_precision_ && device_type_.has_value();
  if (on) ran_low_precision_ = true;
}

void AmpExtension::on_phase_begin(Phase phase) noexcept {
  count_phase(phase);
  if (phase == Phase::Optimizer) optimizer_began_ = true;
  if (phase != Phase::Forward) return;
  forward_this_step_ = true;
  if (upcast_this_step_) {
    try {
      saved_.push_back(enter_fp32_autocast(*device_type_));
    } catch (const std::exception& e) {
      detail::warn(
          "fp32 autocast could not start; 16-bit tensors of earlier steps stay as they are: ",
          e.what());
      saved_.push_back(AutocastState{autocast_enabled(*device_type_), *dtype_, true});
    }
    return;
  }
  if (!amp_this_step_) return;
  try {
    saved_.push_back(enter_autocast(*device_type_, *dtype_, true));
  } catch (const std::exception& e) {
    detail::warn("autocast could not start, this forward runs in fp32: ", e.what());
    saved_.push_back(AutocastState{autocast_enabled(*device_type_), *dtype_, true});
  }
}

void AmpExtension::on_phase_end(Phase phase, bool) noexcept {
  if (phase != Phase::Forward || !(amp_this_step_ || upcast_this_step_) || saved_.empty()) return;
  leave_autocast(*device_type_, saved_.back());
  saved_.pop_back();
}

void AmpExtension::on_step_end(std::int64_t, bool failed) noexcept {
  while (!saved_.empty() && device_type_) {  // a forward left open cannot outlive its step
    leave_autocast(*device_type_, saved_.back());
    saved_.pop_back();
  }
  const double step_ms = static_cast<double>(now_ns() - step_begin_ns_) / 1e6;
  (amp_this_step_ ? epoch_.steps_low_precision : epoch_.steps_fp32) += 1;
  if (auto_policy() && failed && (amp_this_step_ || comparison_this_step_)) {
    // The exception is on its way out of the loop's step; whatever its cause, a 16-bit step (or
    // the fp32 step that met what one left behind) cannot be trusted with the rest of the run.
    try {
      const std::string where = amp_this_step_
                                    ? std::string("a mixed-precision (") +
                                          std::string(short_dtype_name(*dtype_)) + ") step"
                                    : std::string("an fp32 comparison step of the watch");
      record(policy_.fail(global_step_,
                          "step " + std::to_string(global_step_) + " failed in " + where +
                              ", so mixed precision is off for good (fathom::guarded_step runs "
                              "such a step again in fp32; from a loop's own StepScope the "
                              "exception goes on to the loop)"));
      pending_failure_ = epoch_.events.size() - 1;
      pending_failure_optimizer_began_ = optimizer_began_;
    } catch (const std::exception& e) {
      detail::warn("the mixed-precision policy failed and stays off: ", e.what());
    }
  } else if (auto_policy() && !failed) {
    if (!unguarded_step_ && forward_this_step_ && !region_this_step_ && !guarded_this_step_ &&
        !amp_this_step_)
      unguarded_step_ = global_step_;
    StepOutcome o;
    o.step = global_step_;
    o.nonfinite_gradients = nonfinite_this_step_;
    o.grad_scaling = scaled_this_step_;
    o.step_ms = step_ms;
    o.low_precision = amp_this_step_;
    // Reading the loss waits for it; only the windows that compare losses pay for it.
    const AmpStage stage = policy_.stage();
    if (loss_.defined() && (stage == AmpStage::WarmingUp || stage == AmpStage::Watching)) {
      try {
        o.loss = loss_.item<double>();
      } catch (const std::exception& e) {
        // Without the loss this step's comparison is skipped; the policy waits for the next.
        detail::warn("the loss could not be read: ", e.what());
      }
    }
    try {
      if (std::optional<AmpEvent> ev = policy_.observe(o)) {
        if (ev->kind == AmpEventKind::Enabled) {
          std::string why;
          if (!prepare(why)) {
            ev = policy_.refuse(global_step_, why);
          } else if (std::optional<std::string> emulated =
                         options_.auto_options().native_only
                             ? amp_not_native(device_, *device_type_ == c10::DeviceType::CUDA)
                             : std::nullopt) {
            device_type_.reset();  // prepared for nothing: no step runs under autocast
            dtype_.reset();
            scaler_.reset();
            ev = policy_.refuse(global_step_, *emulated);
          } else if (unguarded_step_) {
            device_type_.reset();
            dtype_.reset();
            scaler_.reset();
            ev = policy_.refuse(
                global_step_,
                "step " + std::to_string(*unguarded_step_) +
                    "'s forward ran outside fathom::forward, fathom::block and "
                    "fathom::guarded_step, so an op failing in 16 bits (one with no 16-bit "
                    "kernel) could not be run again in fp32 and would end the loop; Auto tries "
                    "mixed precision only where it can undo a failure: run the model through "
                    "fathom::forward(model, x) (Python: session.forward(model, x)), or the step "
                    "through fathom::guarded_step");
          } else {
            ev->detail += "; trying " + std::string(short_dtype_name(*dtype_)) + " autocast on " +
                          lower_device_name(*device_type_) + tried_on();
          }
        }
        record(std::move(*ev));
      }
    } catch (const std::exception& e) {
      detail::warn("the mixed-precision policy failed and stays off: ", e.what());
      record(policy_.refuse(global_step_, e.what()));
    }
  }
  loss_ = at::Tensor();
  ++global_step_;
}

void AmpExtension::on_footprint(FootprintParts& parts, Environment&) noexcept {
  parts.mixed_precision = epoch_.steps_low_precision > 0;
}

void AmpExtension::on_epoch_measured(EpochSummary& epoch, Environment&) noexcept {
  // The section is complete before the advisor runs: its mixed-precision rules (amp_advice.cpp)
  // read what ran, what Auto did and the device, and make every finding from them.
  try {
    MixedPrecisionSummary& m = epoch_;
    switch (options_.when()) {
      case AmpOptions::When::Always:
        m.policy = "on";
        m.state = dtype_ && !always_failed_ ? "enabled" : "fp32";
        break;
      case AmpOptions::When::Never:
        m.policy = "off";
        m.state = "fp32";
        break;
      case AmpOptions::When::Mode:
        m.policy = std::string(mode_name(mode_));
        m.state = auto_policy() ? std::string(amp_stage_name(policy_.stage())) : "fp32";
        break;
    }
    if (dtype_) m.dtype = std::string(short_dtype_name(*dtype_));
    if (device_type_) m.device_type = lower_device_name(*device_type_);
    m.grad_scaling = scaler_.has_value() && last_scale_.has_value();
    if (m.grad_scaling) m.scale = last_scale_;
    if (auto_policy()) {
      m.fp32_step_ms = policy_.fp32_step_ms();
      m.amp_step_ms = policy_.amp_step_ms();
      m.fp32_loss_reference = policy_.fp32_loss_reference();
      m.amp_loss = policy_.amp_loss();
    }
    m.device = device_;
    epoch.mixed_precision = m;
  } catch (const std::exception& e) {
    detail::warn("the mixed-precision section could not be written: ", e.what());
  }
  on_epoch_begin(0);
}

}  // namespace detail

// --- public entry points ---------------------------------------------------------------------

detail::AmpExtension* detail::amp_of(SessionState* state) noexcept {
  return state ? state->extensions().amp : nullptr;
}

bool detail::amp_region_failed(const std::exception& error) noexcept {
  return amp_region_failed(error.what());
}

bool detail::amp_region_failed(const char* what) noexcept {
  detail::AmpExtension* amp = detail::amp_of(detail::SessionState::current());
  return amp && amp->recover_failed_region(what);
}

void detail::amp_region_runs() noexcept {
  if (detail::AmpExtension* amp = detail::amp_of(detail::SessionState::current()))
    amp->note_region();
}

namespace {

// Options no step could use, refused whether or not fathom is on (a script that works with
// FATHOM_MODE=off must not fail with it on). Each test is written so that NaN fails it.
void check_amp_options(const AmpOptions& options) {
  const AutoAmpOptions& a = options.auto_options();
  if (!(a.tolerance >= 0 && std::isfinite(a.tolerance)))
    throw Error(
        "AmpOptions tolerance must be a finite number >= 0 (0.1 allows the loss 10 % above the "
        "fp32 trend), got " +
        std::to_string(a.tolerance));
  if (a.warmup_steps < 0 || a.watch_steps < 0)
    throw Error(std::string("AmpOptions ") + (a.warmup_steps < 0 ? "warmup_steps" : "watch_steps") +
                " must be >= 0 (fathom warms up at least 3 steps and watches at least 1), got " +
                std::to_string(a.warmup_steps < 0 ? a.warmup_steps : a.watch_steps));
  const double sig = a.significance;
  if (!(sig > 0 && sig < 1))
    throw Error(
        "AmpOptions significance must be in (0, 1) (0.01: the watch rolls back at a "
        "one-sided p below 1 %), got " +
        std::to_string(sig));
  if (options.dtype() && *options.dtype() != c10::ScalarType::BFloat16 &&
      *options.dtype() != c10::ScalarType::Half)
    throw Error(std::string("AmpOptions dtype must be torch::kBFloat16 or torch::kHalf, got ") +
                c10::toString(*options.dtype()));
  GradScaler check(options.scaler());  // throws on bad scaler options now rather than at enable
}

}  // namespace

void configure_amp(Session& session, const AmpOptions& options) {
  check_amp_options(options);
  if (detail::AmpExtension* amp = detail::amp_of(detail::SessionAccess::state(session)))
    amp->configure(options);
}

GradScaler* session_grad_scaler(Session& session) noexcept {
  detail::AmpExtension* amp = detail::amp_of(detail::SessionAccess::state(session));
  return amp ? amp->scaler() : nullptr;
}

}  // namespace fathom
