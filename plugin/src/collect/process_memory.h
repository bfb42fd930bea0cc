#pragma once
// The process's resident memory, from /proc on Linux. Returns nullopt where it cannot be read.
#include <cstdint>
#include <optional>

namespace fathom {

std::optional<std::int64_t> current_rss_bytes() noexcept;
// Peak resident memory since the process started, or since the last reset_peak_rss().
std::optional<std::int64_t> peak_rss_bytes() noexcept;
// Resets the kernel's high-water mark (Linux 4.0+); returns false where not permitted.
bool reset_peak_rss() noexcept;

}  // namespace fathom
