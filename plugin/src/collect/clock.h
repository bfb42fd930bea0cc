#pragma once
#include <chrono>
#include <cstdint>

namespace fathom {

// Monotonic nanoseconds; every host timestamp fathom records comes from here.
inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace fathom
