#pragma once
// Options::progress: the live progress line on standard error (report/progress_line.h), redrawn
// at most every kRedrawNs from the step ends' own timestamps (no clock read, no write in between),
// cleared at each epoch's end before the epoch summary prints.
#include <fathom/options.h>

#include <memory>
#include <optional>

#include "framework/allocator_access.h"
#include "framework/session_extension.h"

namespace fathom::detail {

class ProgressExtension final : public SessionExtension {
 public:
  static constexpr std::int64_t kRedrawNs = 200'000'000;
  // allocator: the device's caching allocator, where the line reads the memory in use; null on
  // CPU, where it reads the resident memory.
  explicit ProgressExtension(std::unique_ptr<AllocatorAccess> allocator);
  ~ProgressExtension() override;

  void on_epoch_begin(std::int64_t epoch) noexcept override;
  void on_step_timed(const StepRecord& step) noexcept override;
  void on_epoch_end(EpochSummary& epoch, Environment& environment) noexcept override;

 private:
  std::unique_ptr<AllocatorAccess> allocator_;
  std::int64_t epoch_ = 0;
  std::int64_t window_begin_ns_ = 0;  // the first step's begin since the last redraw
  std::int64_t window_steps_ = 0;
  std::int64_t window_samples_ = 0;
  double window_step_ns_ = 0;
  std::int64_t last_draw_ns_ = 0;
  std::optional<std::int64_t> findings_;
  std::int64_t findings_epoch_ = 0;
};

// True when the line should be drawn: On, or Auto with standard error a terminal.
bool progress_wanted(Progress p) noexcept;

}  // namespace fathom::detail
