#pragma once
// A bounded sample of one number per step (a rank's work per step) and its median. Medians, not
// means, rank the ranks: a first step that allocates and connects, or one hiccup, must not make
// a rank look like a straggler. Beyond kCapacity steps every other sample is dropped and the
// stride doubles, so memory stays fixed and the sample stays spread over the whole epoch.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace fathom {

class StepSamples {
 public:
  static constexpr std::size_t kCapacity = 4096;

  void add(double v) noexcept;
  std::optional<double> median() const;
  std::size_t size() const noexcept { return samples_.size(); }
  void clear() noexcept;

 private:
  std::vector<double> samples_;
  std::int64_t stride_ = 1;
  std::int64_t seen_ = 0;
};

}  // namespace fathom
