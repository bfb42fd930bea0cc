// The scopes of <fathom/session.h> (phase, step, epoch, module): each tells the session's state
// where it begins and ends. The Session that builds the state and its features is session.cpp.
#include <fathom/error.h>
#include <fathom/session.h>
#include <torch/nn/module.h>

#include "base/warning_sink.h"
#include "collect/clock.h"
#include "collect/nvtx.h"
#include "framework/copy_record.h"
#include "framework/session_state.h"
#include "framework/timeline_sink.h"

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
  detail::TimelineSink* trace = s->extensions().timeline;
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
        detail::swallowed("framework/scopes.cpp");
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
      detail::swallowed("framework/scopes.cpp");
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
      detail::swallowed("framework/scopes.cpp");
    }
  }
  if (detail::TimelineSink* trace = s->extensions().timeline;
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

}  // namespace fathom
