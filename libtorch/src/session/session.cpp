#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fathom/error.h>
#include <fathom/session.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>

#include <exception>
#include <iostream>

#include "amp/amp_extension.h"
#include "checkpoint/checkpoint_extension.h"
#include "collect/clock.h"
#include "collect/host_info.h"
#include "distributed/distributed_extension.h"
#include "measure/cuda_allocator_access.h"
#include "measure/cupti_extension.h"
#include "measure/device_info.h"
#include "measure/energy_extension.h"
#include "measure/flop_counter_extension.h"
#include "measure/footprint_extension.h"
#include "measure/telemetry_extension.h"
#include "records/atomic_file.h"
#include "records/warning_sink.h"
#include "session/copy_record.h"
#include "session/module_type_name.h"
#include "session/progress_extension.h"
#include "session/session_state.h"
#include "session/trace_extension.h"

namespace fathom {

using detail::SessionState;

// --- PhaseScope -------------------------------------------------------------------------------

// Every scope registers where it keeps its state (SessionState::hold): a Session that ends first
// sets it to null, and the scope's end is then a no-op.

PhaseScope::PhaseScope(SessionState* state, Phase phase) noexcept : state_(state), phase_(phase) {
  if (!state_ || !state_->hold(&state_, "phase")) return;
  exceptions_at_begin_ = std::uncaught_exceptions();
  device_slot_ = state_->begin_phase(phase_);
  begin_ns_ = now_ns();
}

PhaseScope::~PhaseScope() {
  if (!state_) return;
  state_->end_phase(phase_, begin_ns_, device_slot_,
                    failed_ || std::uncaught_exceptions() > exceptions_at_begin_);
  state_->release(&state_);
}

// --- StepScope --------------------------------------------------------------------------------

StepScope::StepScope(SessionState* state, std::int64_t samples) noexcept : state_(state) {
  if (!state_ || !state_->hold(&state_, "step")) return;
  exceptions_at_begin_ = std::uncaught_exceptions();
  samples_ = samples;
  // A step inside a step: ignored (warned), so the open one keeps its phases and its count.
  if (state_->step_open()) {
    state_->nested_scope("step");
    return;
  }
  opened_ = true;
  SessionState::push_current(state_);
  state_->begin_step();
  begin_ns_ = now_ns();
}

StepScope::~StepScope() {
  if (!state_) return;
  if (opened_) {
    state_->end_step(begin_ns_, samples_,
                     failed_ || std::uncaught_exceptions() > exceptions_at_begin_);
    SessionState::pop_current(state_);
  }
  state_->release(&state_);
}

at::Tensor StepScope::to_device(const at::Tensor& t, c10::Device device, bool non_blocking) {
  if (!state_) return t.to(device, non_blocking);
  auto copy_and_record = [&] {
    const std::int64_t begin = now_ns();
    at::Tensor out = t.to(device, non_blocking);
    const std::int64_t end = now_ns();
    if (auto r = detail::copy_record_of(t, out, non_blocking, begin, end, state_->step_index()))
      state_->add_copy(*r);
    return out;
  };
  // Inside another phase the copy is part of that phase's time: a copy phase there would nest.
  if (state_->phase_open()) return copy_and_record();
  auto phase = copy();
  return copy_and_record();
}

// --- EpochScope -------------------------------------------------------------------------------

EpochScope::EpochScope(SessionState* state) noexcept : state_(state) {
  if (!state_ || !state_->hold(&state_, "epoch")) return;
  exceptions_at_begin_ = std::uncaught_exceptions();
  // An epoch inside an epoch: ignored (warned); its steps count in the open one, which a second
  // begin_epoch would have thrown away.
  if (state_->epoch_open()) {
    state_->nested_scope("epoch");
    return;
  }
  opened_ = true;
  // Module ranges and fathom::forward inside this epoch (on this thread) reach this session.
  SessionState::push_current(state_);
  state_->begin_epoch();
}

EpochScope::~EpochScope() {
  if (!state_) return;
  if (opened_) {
    state_->end_epoch(failed_ || std::uncaught_exceptions() > exceptions_at_begin_);
    SessionState::pop_current(state_);
  }
  state_->release(&state_);
}

StepScope EpochScope::step(std::int64_t samples) {
  check_step_samples(samples);
  return StepScope(state_, samples);
}

// --- ModuleScope ------------------------------------------------------------------------------

ModuleScope::ModuleScope(const torch::nn::Module& module) noexcept {
  SessionState* s = SessionState::current();
  if (!s) return;
  detail::TraceExtension* trace = s->extensions().trace;
  if (!s->module_ranges() && !trace) return;
  const SessionState::WatchedModule* watched = s->watched_module(&module);
  if (s->module_ranges()) {
    if (watched) {
      nvtx::push(nvtx::Kind::Module, watched->name);
      pushed_ = true;
    } else {
      try {
        nvtx::push(nvtx::Kind::Module, module.name().c_str());
        pushed_ = true;
      } catch (...) {
        detail::swallowed("session/session.cpp");
      }
    }
  }
  // state_ is set before it is registered: a session ending on another thread meanwhile finds
  // it in its holders and nulls it (hold nulls it too when it fails).
  if (trace && (state_ = s, s->hold(&state_, "module"))) {
    try {
      trace->module_begin(watched ? watched->label : module.name());
      traced_ = trace;
    } catch (...) {
      detail::swallowed("session/session.cpp");
    }
  }
}

ModuleScope::ModuleScope(std::string_view name) noexcept {
  SessionState* s = SessionState::current();
  if (!s) return;
  if (s->module_ranges()) {
    try {
      nvtx::push(nvtx::Kind::Module, std::string(name).c_str());
      pushed_ = true;
    } catch (...) {
      detail::swallowed("session/session.cpp");
    }
  }
  if (detail::TraceExtension* trace = s->extensions().trace;
      trace && (state_ = s, s->hold(&state_, "module"))) {
    trace->module_begin(name);
    traced_ = trace;
  }
}

ModuleScope::~ModuleScope() {
  // The trace is its session's: gone with it when the session ended first. The NVTX range is
  // the process's, and is popped either way.
  if (state_) {
    if (traced_) traced_->module_end();
    state_->release(&state_);
  }
  if (pushed_) nvtx::pop();
}

// --- Session ----------------------------------------------------------------------------------

Session::Session(Options options) {
  Options resolved = options.with_env();
  if (resolved.mode() == Mode::Off) {
    off_options_ = resolved;
    return;
  }
  ensure_writable_folder(resolved.report_dir());
  detail::DeviceInfo device = detail::probe_device();
  state_ = std::make_unique<SessionState>(resolved, device.device);
  Environment& env = state_->report().environment;
  env.device = device.label;
  env.device_name = device.name;
  env.device_memory_bytes = device.memory_bytes;
  env.not_measured.insert(env.not_measured.begin(), device.not_measured.begin(),
                          device.not_measured.end());
  // Extensions: each feature is built here, in the order its callbacks run (phase and step ends in
  // reverse, see session_extension.h), and the ones other code reaches are kept by type. The
  // distributed extension comes last: its epoch end ships the epoch every other one completed.
  SessionState::Extensions& known = state_->extensions();
  // First: its ranges hold every other extension's work at a phase's begin and end.
  if (!resolved.trace_file().empty())
    known.trace = state_->add_extension(
        detail::TraceExtension::open(resolved.trace_file(), "fathom " + state_->report().run_name));
  known.footprint = state_->add_extension(std::make_unique<detail::FootprintExtension>());
  if (device.device)
    state_->add_extension(detail::make_telemetry_extension(device.pci_bus_id, env));
  std::function<void(const GpuActivity&)> observe;
  if (known.trace) observe = [trace = known.trace](const GpuActivity& b) { trace->gpu(b); };
  state_->add_extension(
      detail::make_cupti_extension(resolved, device.device, env, std::move(observe)));
  // After telemetry: it reads the epoch's NVML energy.
  state_->add_extension(std::make_unique<detail::EnergyExtension>());
  known.amp =
      state_->add_extension(std::make_unique<detail::AmpExtension>(resolved.mode(), device.device));
  known.checkpoint = state_->add_extension(std::make_unique<detail::CheckpointExtension>(
      resolved, device.device, env.device_memory_bytes));
  // Inside the others: its callback exists from after their step begins to before their step
  // ends, so what they do there is not counted as the step's work.
  state_->add_extension(std::make_unique<detail::FlopCounterExtension>(resolved));
  known.distributed = detail::add_distributed_extension(*state_);
  if (detail::progress_wanted(resolved.progress()))
    state_->add_extension(
        std::make_unique<detail::ProgressExtension>(detail::make_allocator_access(device.device)));
  if (!resolved.autograd_hook())
    env.not_measured.push_back({"activation bytes per module", detail::kAutogradHookOff});
  state_->claim_report_name();
}

Session::~Session() = default;

EpochScope Session::epoch() noexcept { return EpochScope(state_.get()); }

bool Session::active() const noexcept { return state_ != nullptr; }

const Options& Session::options() const noexcept {
  return state_ ? state_->options() : off_options_;
}

const RunReport& Session::report() const noexcept {
  static const RunReport empty;
  return state_ ? state_->report() : empty;
}

std::string Session::report_path() const { return state_ ? state_->report_path() : std::string(); }

void Session::flush_report() noexcept {
  if (state_) state_->flush_report();
}

namespace {

std::string short_type(const std::string& name) { return detail::short_type_name(name); }

}  // namespace

void Session::watch(const torch::nn::Module& model) {
  if (!state_) return;
  const std::string root = short_type(model.name());
  state_->watch_module(&model, root);
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    state_->watch_module(item.value().get(),
                         item.key() + " (" + short_type(item.value()->name()) + ")");
  }
  const SessionState::Extensions& known = state_->extensions();
  if (known.checkpoint) known.checkpoint->watch(model);
  if (known.footprint) known.footprint->watch(&model, root, model.parameters());
}

void Session::watch_parameters(const void* key, const std::string& name,
                               const std::vector<at::Tensor>& parameters) {
  if (!state_) return;
  if (auto* footprint = state_->extensions().footprint) footprint->watch(key, name, parameters);
}

void Session::watch(const torch::optim::Optimizer& optimizer) {
  if (!state_) return;
  if (auto* footprint = state_->extensions().footprint) footprint->watch(optimizer);
}

}  // namespace fathom
