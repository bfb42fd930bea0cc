#include "display/trace_extension.h"

#include <fathom/error.h>

#include <nlohmann/json.hpp>

#include "base/warning_sink.h"
#include "collect/clock.h"

namespace fathom::detail {

std::unique_ptr<TraceExtension> TraceExtension::open(const std::string& path,
                                                     std::string process_name) {
  try {
    return std::unique_ptr<TraceExtension>(new TraceExtension(
        std::make_unique<TraceEventStream>(path, now_ns(), std::move(process_name))));
  } catch (const std::exception& e) {
    warn("no trace is written: ", e.what());
    return nullptr;
  }
}

TraceExtension::TraceExtension(std::unique_ptr<TraceEventStream> stream)
    : stream_(std::move(stream)) {}

TraceExtension::~TraceExtension() {
  guarded([&] { stream_->close(now_ns()); });
}

// A write that fails gives the trace up: what was flushed stays a readable trace, the run goes
// on, and the report says from when the trace is missing.
template <typename F>
void TraceExtension::guarded(F&& write) noexcept {
  if (!stream_) return;
  try {
    write();
  } catch (const std::exception& e) {
    failure_ = std::string("the trace ") + stream_->path() + " stopped at step " +
               std::to_string(step_) + ": " + e.what();
    warn(failure_);
    stream_.reset();
  } catch (...) {
    swallowed("display/trace_extension.cpp");
    stream_.reset();
  }
}

void TraceExtension::on_epoch_begin(std::int64_t epoch) noexcept {
  guarded([&] {
    data_begin_ns_ = now_ns();
    stream_->begin("epoch " + std::to_string(epoch), "epoch", data_begin_ns_);
  });
}

void TraceExtension::on_step_begin(std::int64_t step) noexcept {
  guarded([&] {
    step_ = step;
    const std::int64_t now = now_ns();
    // The gap since the last step is where a loop loads its data (the report's inferred data).
    stream_->complete("data", "phase", data_begin_ns_, now);
    stream_->begin("step " + std::to_string(step), "step", now);
  });
}

void TraceExtension::on_phase_begin(Phase phase) noexcept {
  guarded([&] { stream_->begin(phase_name(phase), "phase", now_ns()); });
}

void TraceExtension::on_phase_end(Phase, bool) noexcept {
  guarded([&] { stream_->end(now_ns()); });
}

void TraceExtension::on_step_timed(const StepRecord& step) noexcept {
  guarded([&] {
    stream_->end(step.end_ns);
    data_begin_ns_ = step.end_ns;
  });
}

void TraceExtension::module_begin(std::string_view name) noexcept {
  guarded([&] { stream_->begin(name, "module", now_ns()); });
}

void TraceExtension::module_end() noexcept {
  guarded([&] { stream_->end(now_ns()); });
}

void TraceExtension::alarm(std::string_view text) noexcept {
  guarded([&] { stream_->instant(text, "alarm", now_ns()); });
}

void TraceExtension::gpu(const GpuActivity& batch) noexcept {
  guarded([&] { stream_->gpu(batch); });
}

void TraceExtension::on_epoch_measured(EpochSummary&, Environment& env) noexcept {
  if (failure_.empty() || failure_reported_) return;
  try {
    env.not_measured.push_back({"the trace file (Options::trace_file)", failure_});
    failure_reported_ = true;
  } catch (...) {
    swallowed("display/trace_extension.cpp");
  }
}

void TraceExtension::on_epoch_end(EpochSummary& epoch, Environment&) noexcept {
  guarded([&] {
    const std::int64_t now = now_ns();
    // Each finding at the epoch's end, where the report makes it, with what it rests on.
    for (const Finding& f : epoch.findings) {
      nlohmann::json args = {{"id", f.id}, {"severity", std::string(severity_name(f.severity))}};
      if (!f.fix.empty()) args["fix"] = f.fix;
      stream_->instant(f.title, "finding", now,
                       args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    stream_->end(now);
    stream_->flush();
  });
}

}  // namespace fathom::detail
