#pragma once
// What the framework itself writes to the run's timeline besides NVTX: a module scope's range
// and a step alarm. The trace extension (display/trace_extension.h) is the one timeline today;
// the scopes and the state reach it through this seam, so the framework names no feature.
#include <string_view>

namespace fathom::detail {

class TimelineSink {
 public:
  virtual void module_begin(std::string_view name) noexcept = 0;
  virtual void module_end() noexcept = 0;
  virtual void alarm(std::string_view text) noexcept = 0;

 protected:
  ~TimelineSink() = default;
};

}  // namespace fathom::detail
