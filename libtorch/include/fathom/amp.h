#pragma once
// Mixed precision in a fathom session. The loop marks where the loss is and who steps:
//
//   { auto f = step.forward();   loss = criterion(model->forward(x), y); }  // autocast when on
//   { auto b = step.backward();  step.scaled(loss).backward(); }            // GradScaler for fp16
//   { auto o = step.optimizer(); step.apply(optimizer); }                   // unscale, skip on inf
//
// In Mode::Auto fathom runs the first steps in fp32 and fits the loss trend, then turns autocast
// on (bf16 on CPUs and GPUs from compute capability 8.0, fp16 with a GradScaler before), watches
// the next steps, and turns it back off for good, saying why in the report, when the loss goes
// non-finite, when a step throws under mixed precision (or as a comparison step; guarded_step
// then runs it again in fp32), or when the watch window's rank tests show the loss above the fp32
// trend by more than the tolerance or the steps slower (amp_policy.h). Once a 16-bit step has
// run, fp32 forwards run under fp32 autocast, so 16-bit state a step left behind (an LSTM's
// hidden state) is cast up at autocast's ops instead of failing in an fp32 kernel.
// Other modes run fp32 unless AmpOptions::when(Always) says otherwise; Suggest lists what
// mixed precision could gain. configure_amp() changes the defaults.
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <fathom/amp_policy.h>
#include <fathom/grad_scaler.h>

#include <optional>

namespace fathom {

class Session;

class AmpOptions {
 public:
  // Mode: Auto mode's policy decides (the default); Always: from the first step, no watching;
  // Never: not even in Auto mode.
  enum class When { Mode, Always, Never };

  AmpOptions() = default;

  AmpOptions& when(When v) {
    when_ = v;
    return *this;
  }
  When when() const noexcept { return when_; }
  // The 16-bit type; default: bf16 where the device has it, else fp16 (default_autocast_dtype).
  AmpOptions& dtype(c10::ScalarType v) {
    dtype_ = v;
    return *this;
  }
  std::optional<c10::ScalarType> dtype() const noexcept { return dtype_; }
  // The device autocast acts on; default: the loss's device, else the session's (CUDA if any).
  AmpOptions& device_type(c10::DeviceType v) {
    device_type_ = v;
    return *this;
  }
  std::optional<c10::DeviceType> device_type() const noexcept { return device_type_; }
  // Auto policy: warm-up and watch windows, loss tolerance, rollback when slower.
  AmpOptions& warmup_steps(int v) {
    auto_.warmup_steps = v;
    return *this;
  }
  AmpOptions& watch_steps(int v) {
    auto_.watch_steps = v;
    return *this;
  }
  AmpOptions& tolerance(double v) {
    auto_.tolerance = v;
    return *this;
  }
  AmpOptions& rollback_if_slower(bool v) {
    auto_.rollback_if_slower = v;
    return *this;
  }
  // The rank tests' one-sided p below which the watch rolls back (default 0.01).
  AmpOptions& significance(double v) {
    auto_.significance = v;
    return *this;
  }
  const AutoAmpOptions& auto_options() const noexcept { return auto_; }
  // The GradScaler used with fp16.
  AmpOptions& scaler(GradScalerOptions v) {
    scaler_ = v;
    return *this;
  }
  const GradScalerOptions& scaler() const noexcept { return scaler_; }

 private:
  When when_ = When::Mode;
  std::optional<c10::ScalarType> dtype_;
  std::optional<c10::DeviceType> device_type_;
  AutoAmpOptions auto_;
  GradScalerOptions scaler_;
};

// Sets the session's mixed-precision options; call it before the first epoch (it restarts the
// Auto policy). Throws fathom::Error on options no step could use (a tolerance below 0, NaN or
// infinite, negative warm-up or watch steps, a dtype autocast does not take), also when fathom
// is off; otherwise does nothing then.
void configure_amp(Session& session, const AmpOptions& options);

// The session's GradScaler while fp16 runs (nullptr otherwise): to save its state in a checkpoint.
GradScaler* session_grad_scaler(Session& session) noexcept;

}  // namespace fathom
