#pragma once
// Options::trace_file: the session's Chrome / Perfetto trace, written as the run goes
// (report/trace_event_stream.h). The extension sees the epochs, steps and phases through the
// session's callbacks; the module scopes, the step alarms and the GPU batches reach it through
// the session state and the CUPTI extension. A trace that cannot be written is given up with a
// warning and a not-measured entry; training goes on.
#include <fathom/gpu_records.h>

#include <memory>
#include <string>
#include <string_view>

#include "framework/session_extension.h"
#include "framework/timeline_sink.h"
#include "report/trace_event_stream.h"

namespace fathom::detail {

class TraceExtension final : public SessionExtension, public TimelineSink {
 public:
  // Null when the file cannot be created: the warning says why.
  static std::unique_ptr<TraceExtension> open(const std::string& path, std::string process_name);
  ~TraceExtension() override;

  void on_epoch_begin(std::int64_t epoch) noexcept override;
  void on_step_begin(std::int64_t step) noexcept override;
  void on_phase_begin(Phase phase) noexcept override;
  void on_phase_end(Phase phase, bool aborted) noexcept override;
  void on_step_timed(const StepRecord& step) noexcept override;
  void on_epoch_measured(EpochSummary& epoch, Environment& environment) noexcept override;
  void on_epoch_end(EpochSummary& epoch, Environment& environment) noexcept override;

  void module_begin(std::string_view name) noexcept override;
  void module_end() noexcept override;
  void alarm(std::string_view text) noexcept override;
  void gpu(const GpuActivity& batch) noexcept;

 private:
  explicit TraceExtension(std::unique_ptr<TraceEventStream> stream);
  template <typename F>
  void guarded(F&& write) noexcept;

  std::unique_ptr<TraceEventStream> stream_;
  std::string failure_;  // why the trace was given up; said once in the report
  bool failure_reported_ = false;
  std::int64_t data_begin_ns_ = 0;  // the end of the last step, or the epoch's start
  std::int64_t step_ = 0;
};

}  // namespace fathom::detail
