#pragma once
// Mixed precision in a fathom session. The loop marks where the loss is and who steps:
//
//   { auto f = step.forward();   loss = criterion(model->forward(x), y); }  // autocast when on
//   { auto b = step.backward();  step.scaled(loss).backward(); }            // GradScaler for fp16
//   { auto o = step.optimizer(); step.apply(optimizer); }                   // unscale, skip on inf
//
// In Mode::Auto fathom runs the first steps in fp32 and fits the loss trend, then, where the
// device runs 16 bits natively (Tensor Cores; a CPU's AMX or AVX-512 BF16), turns autocast on
// (bf16 on CPUs and GPUs from compute capability 8.0, fp16 with a GradScaler before), watches a
// short trial, and turns it back off for good, saying why in the report, when the loss goes
// non-finite, when steps run 1.5x slower (at once), when a step throws under mixed precision (or
// as a comparison step; guarded_step then runs it again in fp32; a fathom::forward or Sequential
// that throws runs again in fp32 at once), or when the trial does not show the loss within the
// tolerance of the fp32 trend and the steps faster (amp_policy.h). It tries only where a failure
// can be undone: a loop whose fp32 steps ran their forward outside fathom::forward, fathom::block
// and fathom::guarded_step gets a not_enabled event saying what to wrap. Once a 16-bit step has
// run, fp32 forwards run under fp32 autocast, so 16-bit state a step left behind (an LSTM's
// hidden state) is cast up at autocast's ops instead of failing in an fp32 kernel.
// Other modes run fp32 unless AmpOptions::when(Always) says otherwise; Suggest lists what
// mixed precision could gain. configure_amp() changes the defaults.
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <fathom/amp_policy.h>
#include <fathom/grad_scaler.h>

#include <exception>
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
  // Try mixed precision only where the device runs 16 bits natively (the default: Tensor Cores,
  // a CPU's AMX or AVX-512 BF16 units within ONEDNN_MAX_CPU_ISA and ATEN_CPU_CAPABILITY); false
  // tries it anywhere, for the step timing to decide.
  AmpOptions& native_only(bool v) {
    auto_.native_only = v;
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

namespace detail {
// The call of fathom::forward and fathom::forward(Sequential) when the region they ran threw:
// true when that region ran under Auto mode's autocast, which is then off for good (the report's
// event has the error) and the rest of the step runs in fp32 under fp32 autocast, so the region
// may run again; false: not Auto's doing, rethrow.
bool amp_region_failed(const std::exception& error) noexcept;
bool amp_region_failed(const char* what) noexcept;
// A region that can run again is about to run: Auto mode tries mixed precision only in loops
// whose forwards run such regions (or run inside fathom::guarded_step).
void amp_region_runs() noexcept;

// Runs a region once; when it throws under Auto's mixed precision (an op with no 16-bit kernel),
// once more in fp32, so Auto mode never ends a loop that ran without it. The region must be safe
// to run twice (a forward is: what it changed in modules, running statistics, is rerun too).
template <typename Run>
auto amp_region(Run&& run) -> decltype(run()) {
  amp_region_runs();
  try {
    return run();
  } catch (const std::exception& e) {
    if (!amp_region_failed(e)) throw;
  }
  return run();
}
}  // namespace detail

}  // namespace fathom
