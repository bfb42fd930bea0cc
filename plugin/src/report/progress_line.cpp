#include "report/progress_line.h"

#include <fmt/format.h>

#include "base/bytes_text.h"

namespace fathom {

std::string progress_line_text(const ProgressSample& s) {
  std::string out = fmt::format("fathom  epoch {}  step {}", s.epoch, s.step);
  if (s.samples_per_s) {
    const double r = *s.samples_per_s;
    if (r >= 100)
      fmt::format_to(std::back_inserter(out), "  {} samples/s", static_cast<std::int64_t>(r + 0.5));
    else
      fmt::format_to(std::back_inserter(out), "  {:.1f} samples/s", r);
  }
  if (s.step_ms >= 100)
    fmt::format_to(std::back_inserter(out), "  {:.0f} ms/step", s.step_ms);
  else if (s.step_ms >= 1)
    fmt::format_to(std::back_inserter(out), "  {:.1f} ms/step", s.step_ms);
  else
    fmt::format_to(std::back_inserter(out), "  {:.0f} us/step", s.step_ms * 1000);
  if (s.memory_bytes)
    fmt::format_to(std::back_inserter(out), "  {} {}", s.memory_label,
                   detail::bytes_text(*s.memory_bytes));
  if (s.findings)
    fmt::format_to(std::back_inserter(out), "  {} finding{} (epoch {})", *s.findings,
                   *s.findings == 1 ? "" : "s", s.findings_epoch);
  return out;
}

}  // namespace fathom
