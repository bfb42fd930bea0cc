#include "aggregate/step_samples.h"

#include <algorithm>

#include "base/warning_sink.h"

namespace fathom {

void StepSamples::add(double v) noexcept {
  if (seen_++ % stride_ != 0) return;
  if (samples_.size() >= kCapacity) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < samples_.size(); i += 2) samples_[kept++] = samples_[i];
    samples_.resize(kept);
    stride_ *= 2;
    if ((seen_ - 1) % stride_ != 0) return;
  }
  try {
    samples_.push_back(v);
  } catch (...) {
    detail::swallowed("aggregate/step_samples.cpp");
  }
}

std::optional<double> StepSamples::median() const {
  if (samples_.empty()) return std::nullopt;
  std::vector<double> v = samples_;
  const std::size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
  const double hi = v[n / 2];
  if (n % 2) return hi;
  return 0.5 * (hi + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2)));
}

void StepSamples::clear() noexcept {
  samples_.clear();
  stride_ = 1;
  seen_ = 0;
}

}  // namespace fathom
