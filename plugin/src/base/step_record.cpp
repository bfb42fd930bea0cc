#include <fathom/error.h>
#include <fathom/records.h>
#include <fmt/format.h>

namespace fathom {

void check_step_samples(std::int64_t samples) {
  if (samples >= 0 && samples <= kMaxStepSamples) return;
  throw Error(
      fmt::format("a step of {} samples is not valid; give its batch size, 0 to {} (0 "
                  "when it is not known)",
                  samples, kMaxStepSamples));
}

}  // namespace fathom
