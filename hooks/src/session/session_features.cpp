// Session's constructor: the one place that builds every feature, in the order their callbacks
// run (session_extension.h), and hands the session state its device's allocator.
#include <fathom/error.h>
#include <fathom/report.h>
#include <fathom/session.h>

#include "amp/amp_extension.h"
#include "base/atomic_file.h"
#include "checkpoint/checkpoint_extension.h"
#include "display/progress_extension.h"
#include "display/trace_extension.h"
#include "distributed/distributed_extension.h"
#include "framework/session_state.h"
#include "measure/cuda_allocator_access.h"
#include "measure/cupti_extension.h"
#include "measure/device_info.h"
#include "measure/energy_extension.h"
#include "measure/flop_counter_extension.h"
#include "measure/footprint_extension.h"
#include "measure/telemetry_extension.h"

namespace fathom {

using detail::SessionState;

// --- Session ----------------------------------------------------------------------------------

Session::Session(Options options) {
  Options resolved = options.with_env();
  if (resolved.mode() == Mode::Off) {
    off_options_ = resolved;
    return;
  }
  ensure_writable_folder(resolved.report_dir());
  detail::DeviceInfo device = detail::probe_device();
  state_ = std::make_unique<SessionState>(resolved, device.device,
                                          detail::make_allocator_access(device.device));
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
  detail::TraceExtension* trace = nullptr;
  if (!resolved.trace_file().empty()) {
    trace = state_->add_extension(
        detail::TraceExtension::open(resolved.trace_file(), "fathom " + state_->report().run_name));
    known.timeline = trace;
  }
  known.footprint = state_->add_extension(std::make_unique<detail::FootprintExtension>());
  if (device.device)
    state_->add_extension(detail::make_telemetry_extension(device.pci_bus_id, env));
  std::function<void(const GpuActivity&)> observe;
  if (trace) observe = [trace](const GpuActivity& b) { trace->gpu(b); };
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

}  // namespace fathom
