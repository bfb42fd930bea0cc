#pragma once
// A memory budget: a number of bytes, or a fraction of a whole (the device's memory on a GPU).
// Used by Options::checkpoint_budget and the checkpoint planner.
#include <cstdint>
#include <string>
#include <string_view>

namespace fathom {

class MemoryBudget {
 public:
  static MemoryBudget bytes(std::int64_t b) noexcept { return MemoryBudget(false, b, 0.0); }
  // f in (0, 1]: e.g. 0.8 for 80 % of the device memory.
  static MemoryBudget fraction(double f) noexcept { return MemoryBudget(true, 0, f); }

  bool is_fraction() const noexcept { return is_fraction_; }
  std::int64_t byte_count() const noexcept { return bytes_; }
  double fraction_of_whole() const noexcept { return fraction_; }
  // The budget in bytes, a fraction being taken of whole_bytes.
  std::int64_t resolve(std::int64_t whole_bytes) const noexcept {
    return is_fraction_ ? static_cast<std::int64_t>(fraction_ * static_cast<double>(whole_bytes))
                        : bytes_;
  }
  bool operator==(const MemoryBudget&) const = default;

 private:
  MemoryBudget(bool is_fraction, std::int64_t b, double f) noexcept
      : is_fraction_(is_fraction), bytes_(b), fraction_(f) {}
  bool is_fraction_ = false;
  std::int64_t bytes_ = 0;
  double fraction_ = 0.0;
};

// Reads "12GiB", "512MiB", "8GB", "1000000" (bytes; K/M/G/T = powers of 1024, KB/MB/GB/TB =
// powers of 1000) or "80%" / "0.8" (a fraction). Throws fathom::Error naming `what` (the
// variable or option), the text and the accepted forms.
MemoryBudget parse_memory_budget(std::string_view text, std::string_view what);

// "12.00 GiB" or "80 %".
std::string memory_budget_text(const MemoryBudget& b);

}  // namespace fathom
