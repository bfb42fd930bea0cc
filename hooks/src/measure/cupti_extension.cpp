#include "measure/cupti_extension.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <kineto/IActivityProfiler.h>
#include <kineto/libkineto.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include <atomic>
#include <exception>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "base/warning_sink.h"
#include "collect/clock.h"

namespace fathom::detail {
namespace {

// Whether the profile Kineto prepared last records GPU work: 1 yes, 0 no (activities=[CPU]),
// -1 not known (no profile prepared since fathom asked to be told).
std::atomic<int> g_profile_records_gpu{-1};

// Kineto hands each trace's activity types to its child profilers when the trace is prepared
// (IActivityProfiler::configure): the one public place that says whether torch.profiler was
// asked for CUDA activities. This child runs nothing; it only remembers that.
class ActivityTypesWatcher final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return none_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& types, const libkineto::Config&) override {
    using libkineto::ActivityType;
    const bool gpu = types.count(ActivityType::CONCURRENT_KERNEL) ||
                     types.count(ActivityType::GPU_MEMCPY) || types.count(ActivityType::GPU_MEMSET);
    g_profile_records_gpu.store(gpu ? 1 : 0);
    return nullptr;  // no session of its own
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "fathom: activity types of the trace";
  std::set<libkineto::ActivityType> none_;
};

void watch_kineto_activity_types() noexcept {
  static std::once_flag once;
  try {
    std::call_once(once, [] {
      libkineto::api().registerProfilerFactory(
          [] { return std::make_unique<ActivityTypesWatcher>(); });
    });
  } catch (...) {
    detail::swallowed("measure/cupti_extension.cpp");
  }
}

}  // namespace

bool kineto_profile_records_gpu() noexcept { return g_profile_records_gpu.load() != 0; }

bool kineto_profiling() noexcept {
  try {
    // Recording: torch's profiler state is pushed by enableProfiler.
    auto* state = torch::profiler::impl::ProfilerStateBase::get();
    if (state && state->profilerType() == torch::profiler::impl::ActiveProfilerType::KINETO)
      return true;
    // Warming up: Kineto already owns CUPTI (its callbacks, its kinds) before torch's state is
    // pushed. Its activity profiler says so from the warm-up to the end of the trace.
    auto& kineto = libkineto::api();
    return kineto.isProfilerInitialized() && kineto.activityProfiler().isActive();
  } catch (...) {
    return false;
  }
}

KnownClient torch_profiler_client() {
  watch_kineto_activity_types();
  // torch 2.11's Kineto subscribes without a name; a later one may give one.
  return {"torch.profiler (Kineto)",
          [] { return kineto_profiling(); },
          {"kineto", "Kineto", "pytorch"},
          [] { return kineto_profile_records_gpu(); }};
}

CuptiExtension::CuptiExtension(const Options& options, std::optional<DeviceProperties> device,
                               Environment& env, Starter start, CuptiDeviceHooks hooks)
    : aggregator_(std::make_unique<GpuPipeline>()),
      device_(std::move(device)),
      hooks_(std::move(hooks)),
      record_shapes_(options.record_shapes()) {
  auto sink = [this](GpuActivity&& batch) { take(std::move(batch)); };
  if (!options.record_activity().empty()) {
    try {
      recorder_ = std::make_unique<ActivityFileWriter>(options.record_activity());
    } catch (const std::exception& e) {
      own_notes_.push_back({"GPU activity file", e.what()});
    }
  }
  CuptiConfig config;
  config.known_clients.push_back(torch_profiler_client());
  config.where = [this] {
    return began_ ? "epoch " + std::to_string(epoch_) + ", step " + std::to_string(step_)
                  : std::string("the session start");
  };
  config.synchronize_device = hooks_.synchronize;
  try {
    collector_ =
        start ? start(sink, std::move(config)) : CuptiCollector::start(sink, std::move(config));
  } catch (...) {
    detail::swallowed("measure/cupti_extension.cpp");
  }
  if (!collector_) collector_ = CuptiCollector::unavailable("the collector could not be created");
  thread_ = cupti_thread_id();  // the thread id type is read when the collector arms
  if (recorder_ && device_) {
    GpuActivity header;
    header.devices.push_back(*device_);
    record(header);
  }
  follow_collector();
  report_changes(env);
}

CuptiExtension::~CuptiExtension() {
  ops_.reset();  // no op may reach the collector while it stops
  if (collector_) collector_->stop();
  record(unrecorded_annotations_);
  if (recorder_) {
    try {
      recorder_->close();  // the end line: a complete file, told apart from a truncated one
    } catch (const std::exception& e) {
      detail::warn("the GPU activity file is incomplete: ", e.what());
    }
  }
}

// The op hooks live as long as the collector can collect, standing aside included.
void CuptiExtension::follow_collector() noexcept {
  try {
    if (collector_ && collector_->live()) {
      if (!ops_) ops_ = std::make_unique<OpCorrelation>(*collector_, record_shapes_);
    } else {
      ops_.reset();
    }
  } catch (...) {
    ops_.reset();
  }
}

void CuptiExtension::record(const GpuActivity& batch) noexcept {
  if (!recorder_) return;
  try {
    recorder_->write(batch);
  } catch (const std::exception& e) {
    // A full disk must not stop the measurements: the file stops, the report says why.
    try {
      own_notes_.push_back({"GPU activity file", std::string(e.what()) + "; recording stopped"});
    } catch (...) {
      detail::swallowed("measure/cupti_extension.cpp");
    }
    recorder_.reset();
  }
}

void CuptiExtension::take(GpuActivity&& batch) noexcept {
  record(batch);
  if (hooks_.observe) hooks_.observe(batch);
  if (aggregator_) aggregator_->add(batch);
}

void CuptiExtension::annotate(std::string name, AnnotationRole role, Phase phase,
                              std::int64_t begin_ns, std::int64_t end_ns) noexcept {
  if (!aggregator_ || !collecting()) return;
  try {
    // The training thread as CUPTI names it, so the timeline can prefer its ranges.
    AnnotationRecord a{std::move(name), thread_, begin_ns, end_ns, role, phase};
    if (recorder_) unrecorded_annotations_.annotations.push_back(a);
    aggregator_->add(std::move(a));
  } catch (...) {
    detail::swallowed("measure/cupti_extension.cpp");
  }
}

void CuptiExtension::on_epoch_begin(std::int64_t epoch) noexcept {
  began_ = true;
  epoch_ = epoch;
  data_begin_ns_ = now_ns();
  if (aggregator_ && device_) aggregator_->add(*device_);
}

void CuptiExtension::on_step_begin(std::int64_t step) noexcept {
  step_ = step;
  step_begin_ns_ = now_ns();
  // The time between steps is the loader's: the timeline calls GPU idle time in it data wait.
  annotate("data", AnnotationRole::Phase, Phase::Data, data_begin_ns_, step_begin_ns_);
}

void CuptiExtension::on_phase_begin(Phase p) noexcept {
  // A profiler seen here gets CUPTI before this phase launches anything.
  if (collector_) collector_->check_clients();
  const auto i = static_cast<std::size_t>(p);
  phase_begin_ns_[i] = now_ns();
  phase_pushed_[i] = external_ids_enabled();
  if (phase_pushed_[i]) push_external_id(ExternalIdKind::Phase, phase_external_id(p));
}

void CuptiExtension::on_phase_end(Phase p, bool) noexcept {
  const auto i = static_cast<std::size_t>(p);
  if (phase_pushed_[i]) pop_external_id(ExternalIdKind::Phase);
  phase_pushed_[i] = 0;
  if (hooks_.phase_events && collector_) collector_->note_traced_calls(2);
  annotate(std::string(phase_name(p)), AnnotationRole::Phase, p, phase_begin_ns_[i], now_ns());
}

void CuptiExtension::on_step_end(std::int64_t step, bool) noexcept {
  const std::int64_t now = now_ns();
  try {
    annotate("step " + std::to_string(step), AnnotationRole::Step, Phase::Data, step_begin_ns_,
             now);
  } catch (...) {
    detail::swallowed("measure/cupti_extension.cpp");
  }
  data_begin_ns_ = now;
  if (recorder_ && !unrecorded_annotations_.annotations.empty()) {
    record(unrecorded_annotations_);
    unrecorded_annotations_.annotations.clear();
  }
  if (!collector_ || !collector_->live()) return;
  collector_->flush(/*force=*/false);
  follow_collector();
  if (aggregator_) aggregator_->step_end();
}

void CuptiExtension::on_epoch_measured(EpochSummary& epoch, Environment& env) noexcept {
  // Every stream, not just the current one the phase events were on (NCCL, side streams): then a
  // forced flush returns every record of the epoch complete.
  if (collector_ && collector_->collecting() && hooks_.synchronize) {
    try {
      hooks_.synchronize();
    } catch (const std::exception& e) {
      detail::warn("the device could not be synchronized at the epoch end: ", e.what());
    }
  }
  if (collector_) collector_->flush(/*force=*/true);
  follow_collector();
  report_changes(env);
  if (!aggregator_) return;
  try {
    GpuSummaryOptions o;
    o.source = "cupti";
    GpuSummary s = aggregator_->summary(o);
    last_summary_ = s;
    epoch.gpu = std::move(s);
  } catch (const std::exception& e) {
    detail::warn("GPU activity of epoch ", epoch_, " could not be summarized: ", e.what());
  }
  try {
    aggregator_ = std::make_unique<GpuPipeline>();
  } catch (...) {
    aggregator_.reset();
  }
}

// Each new reason the collector gives goes into the report once; the collector says where in
// the run it happened (CuptiConfig::where).
void CuptiExtension::report_changes(Environment& env) noexcept {
  try {
    const std::vector<Unmeasured> notes = collector_->not_measured();
    for (std::size_t i = notes_reported_; i < notes.size(); ++i)
      env.not_measured.push_back(notes[i]);
    notes_reported_ = notes.size();
    for (; own_notes_reported_ < own_notes_.size(); ++own_notes_reported_)
      env.not_measured.push_back(own_notes_[own_notes_reported_]);
  } catch (...) {
    detail::swallowed("measure/cupti_extension.cpp");
  }
}

std::unique_ptr<SessionExtension> make_cupti_extension(
    const Options& options, std::optional<c10::Device> device, Environment& env,
    std::function<void(const GpuActivity&)> observe) {
  if (!device || !device->is_cuda()) return nullptr;
  if (!options.cupti()) {
    env.not_measured.push_back({kCuptiMeasurements,
                                "turned off (Options::cupti(false) or FATHOM_CUPTI=off)",
                                UnmeasuredId::GpuActivity});
    return nullptr;
  }
  std::optional<DeviceProperties> props;
  try {
    const auto* p = at::cuda::getDeviceProperties(device->index());
    props = DeviceProperties{device->index(), p->name, p->major, p->minor,
                             static_cast<std::int64_t>(p->totalGlobalMem)};
  } catch (const std::exception& e) {
    detail::warn("the device's properties could not be read: ", e.what());
  }
  CuptiDeviceHooks hooks;
  hooks.observe = std::move(observe);
  const c10::DeviceIndex index = device->index();
  hooks.synchronize = [index] {
    // Never during a CUDA graph capture: a synchronize there would end the user's capture.
    c10::cuda::CUDAGuard guard(index);
    if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) return;
    c10::cuda::device_synchronize();
  };
  hooks.phase_events = true;  // the session's DeviceMeter records CUDA events around phases
  return std::make_unique<CuptiExtension>(options, std::move(props), env, CuptiExtension::Starter{},
                                          std::move(hooks));
}

}  // namespace fathom::detail
