#include "cupti_extension.h"

#include <ATen/cuda/CUDAContext.h>
#include <fathom/clock.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include <exception>
#include <iostream>
#include <string>

namespace fathom::detail {

bool kineto_profiling() noexcept {
  try {
    auto* state = torch::profiler::impl::ProfilerStateBase::get();
    return state && state->profilerType() == torch::profiler::impl::ActiveProfilerType::KINETO;
  } catch (...) {
    return false;
  }
}

CuptiExtension::CuptiExtension(const Options& options, std::optional<DeviceProperties> device,
                               Environment& env, Starter start)
    : aggregator_(std::make_unique<GpuAggregator>()), device_(std::move(device)) {
  if (kineto_profiling()) {
    collector_ = CuptiCollector::busy(
        "torch.profiler (Kineto) is profiling and holds CUPTI: fathom leaves it alone");
    report_changes(env);
    return;
  }
  auto sink = [this](GpuActivity&& batch) { take(std::move(batch)); };
  if (!options.record_activity().empty()) {
    try {
      recorder_ = std::make_unique<ActivityFileWriter>(options.record_activity());
    } catch (const std::exception& e) {
      own_notes_.push_back({"GPU activity file", e.what()});
    }
  }
  collector_ = start ? start(sink) : CuptiCollector::start(sink);
  if (!collector_) collector_ = CuptiCollector::unavailable("the collector could not be created");
  if (recorder_ && device_) {
    GpuActivity header;
    header.devices.push_back(*device_);
    record(header);
  }
  if (collector_->collecting())
    ops_ = std::make_unique<OpCorrelation>(*collector_, options.record_shapes());
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
      std::cerr << "fathom: the GPU activity file is incomplete: " << e.what() << "\n";
    }
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
    }
    recorder_.reset();
  }
}

void CuptiExtension::take(GpuActivity&& batch) noexcept {
  record(batch);
  if (aggregator_) aggregator_->add(batch);
}

void CuptiExtension::annotate(const char* name, std::int64_t begin_ns,
                              std::int64_t end_ns) noexcept {
  if (!aggregator_ || !collecting()) return;
  try {
    AnnotationRecord a{name, 0, begin_ns, end_ns};
    if (recorder_) unrecorded_annotations_.annotations.push_back(a);
    aggregator_->add(std::move(a));
  } catch (...) {
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
  annotate("data", data_begin_ns_, step_begin_ns_);
}

void CuptiExtension::on_phase_begin(Phase p) noexcept {
  const auto i = static_cast<std::size_t>(p);
  phase_begin_ns_[i] = now_ns();
  phase_pushed_[i] = external_ids_enabled();
  if (phase_pushed_[i]) push_external_id(ExternalIdKind::Phase, phase_external_id(p));
}

void CuptiExtension::on_phase_end(Phase p, bool) noexcept {
  const auto i = static_cast<std::size_t>(p);
  if (phase_pushed_[i]) pop_external_id(ExternalIdKind::Phase);
  phase_pushed_[i] = 0;
  annotate(std::string(phase_name(p)).c_str(), phase_begin_ns_[i], now_ns());
}

void CuptiExtension::on_step_end(std::int64_t step, bool) noexcept {
  const std::int64_t now = now_ns();
  try {
    annotate(("step " + std::to_string(step)).c_str(), step_begin_ns_, now);
  } catch (...) {
  }
  data_begin_ns_ = now;
  if (recorder_ && !unrecorded_annotations_.annotations.empty()) {
    record(unrecorded_annotations_);
    unrecorded_annotations_.annotations.clear();
  }
  if (!collecting()) return;
  if (kineto_profiling()) {
    ops_.reset();
    try {
      collector_->yield("torch.profiler (Kineto) started profiling during epoch " +
                        std::to_string(epoch_) + ", step " + std::to_string(step) +
                        " and took CUPTI");
    } catch (...) {
    }
    return;
  }
  collector_->flush(/*force=*/false);
  if (!collector_->collecting()) ops_.reset();
  if (aggregator_) aggregator_->flush();
}

void CuptiExtension::on_epoch_measured(EpochSummary& epoch, Environment& env) noexcept {
  // The session waited for the epoch's device work (DeviceMeter::drain) before this call, so a
  // forced flush returns every record of the epoch.
  if (collector_) collector_->flush(/*force=*/true);
  if (collector_ && !collector_->collecting()) ops_.reset();
  report_changes(env);
  if (!aggregator_) return;
  try {
    GpuAggregate a = aggregator_->snapshot();
    GpuSummaryOptions o;
    o.source = "cupti";
    GpuSummary s = summarize_gpu(a, o);
    last_summary_ = s;
    epoch.gpu = std::move(s);
  } catch (const std::exception& e) {
    std::cerr << "fathom: GPU activity of epoch " << epoch_
              << " could not be summarized: " << e.what() << "\n";
  }
  try {
    aggregator_ = std::make_unique<GpuAggregator>();
  } catch (...) {
    aggregator_.reset();
  }
}

// Each new reason the collector gives goes into the report once; one that appears after the
// start says from when.
void CuptiExtension::report_changes(Environment& env) noexcept {
  try {
    const std::vector<Unmeasured> notes = collector_->not_measured();
    for (std::size_t i = notes_reported_; i < notes.size(); ++i) {
      Unmeasured u = notes[i];
      if (began_)
        u.why += " (from epoch " + std::to_string(epoch_) + ", step " + std::to_string(step_) + ")";
      env.not_measured.push_back(std::move(u));
    }
    notes_reported_ = notes.size();
    for (; own_notes_reported_ < own_notes_.size(); ++own_notes_reported_)
      env.not_measured.push_back(own_notes_[own_notes_reported_]);
  } catch (...) {
  }
}

std::unique_ptr<SessionExtension> make_cupti_extension(const Options& options,
                                                       std::optional<c10::Device> device,
                                                       Environment& env) {
  if (!device || !device->is_cuda()) return nullptr;
  if (!options.cupti()) {
    env.not_measured.push_back(
        {kCuptiMeasurements, "turned off (Options::cupti(false) or FATHOM_CUPTI=off)"});
    return nullptr;
  }
  std::optional<DeviceProperties> props;
  try {
    const auto* p = at::cuda::getDeviceProperties(device->index());
    props = DeviceProperties{device->index(), p->name, p->major, p->minor,
                             static_cast<std::int64_t>(p->totalGlobalMem)};
  } catch (const std::exception&) {
  }
  return std::make_unique<CuptiExtension>(options, std::move(props), env);
}

}  // namespace fathom::detail
