#include "display/progress_extension.h"

#include <fathom/options.h>
#include <unistd.h>

#include "base/status_line.h"
#include "base/warning_sink.h"
#include "collect/process_memory.h"
#include "report/progress_line.h"

namespace fathom::detail {

bool progress_wanted(Progress p) noexcept {
  return p == Progress::On || (p == Progress::Auto && ::isatty(STDERR_FILENO) == 1);
}

ProgressExtension::ProgressExtension(std::unique_ptr<AllocatorAccess> allocator)
    : allocator_(std::move(allocator)) {}

ProgressExtension::~ProgressExtension() { hide_status_line(); }

void ProgressExtension::on_epoch_begin(std::int64_t epoch) noexcept {
  epoch_ = epoch;
  window_steps_ = window_samples_ = 0;
  window_step_ns_ = 0;
  last_draw_ns_ = 0;
}

void ProgressExtension::on_step_timed(const StepRecord& step) noexcept {
  if (window_steps_ == 0) window_begin_ns_ = step.begin_ns;
  ++window_steps_;
  window_samples_ += step.samples;
  window_step_ns_ += static_cast<double>(step.end_ns - step.begin_ns);
  // The first step draws at once; then at most every kRedrawNs.
  if (last_draw_ns_ != 0 && step.end_ns - last_draw_ns_ < kRedrawNs) return;
  try {
    ProgressSample s;
    s.epoch = epoch_;
    s.step = step.index;
    const double window_s = static_cast<double>(step.end_ns - window_begin_ns_) / 1e9;
    if (window_samples_ > 0 && window_s > 0)
      s.samples_per_s = static_cast<double>(window_samples_) / window_s;
    s.step_ms = window_step_ns_ / static_cast<double>(window_steps_) / 1e6;
    if (allocator_) {
      if (auto r = allocator_->read()) s.memory_bytes = r->allocated;
      s.memory_label = "GPU";
    } else {
      s.memory_bytes = current_rss_bytes();
    }
    s.findings = findings_;
    s.findings_epoch = findings_epoch_;
    show_status_line(progress_line_text(s));
  } catch (...) {
    swallowed("display/progress_extension.cpp");
  }
  last_draw_ns_ = step.end_ns;
  window_steps_ = window_samples_ = 0;
  window_step_ns_ = 0;
}

void ProgressExtension::on_epoch_end(EpochSummary& epoch, Environment&) noexcept {
  // The epoch summary prints next: it starts on a clean line.
  hide_status_line();
  findings_ = static_cast<std::int64_t>(epoch.findings.size());
  findings_epoch_ = epoch.index;
}

}  // namespace fathom::detail
