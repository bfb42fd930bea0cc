#pragma once
// The one place fathom's warnings go. A feature that fails says so here and keeps the training
// running; the report says what was not measured. Every warning is rate-limited per key (the
// first kWarningsPerKey are said, the rest counted and summed up once), and goes to standard
// error unless a session's Options::warnings handler redirects it.
//
// The sink is process-wide on purpose: CUPTI and NVML report from their own threads, outside any
// session. A session installs its handler for its lifetime (WarningRedirect), last in first out.
#include <fathom/options.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace fathom::detail {

inline constexpr int kWarningsPerKey = 3;

// For a `catch (...)` on a path that must not throw: the failure is counted under `where` (a
// string literal) and said, rate-limited. Allocates nothing before it counts, so it is safe
// when memory has run out.
void swallowed(const char* where) noexcept;

// Says message (without the "fathom: " prefix, which the sink adds) under key: warnings with the
// same key are one kind, rate-limited together. Never throws.
void warn_line(std::string_view key, std::string_view message) noexcept;

// The message built from parts as a stream would print them: warn("cupti", "x failed: ", code).
template <typename... Parts>
void warn(std::string_view key, const Parts&... parts) noexcept {
  try {
    std::ostringstream line;
    (line << ... << parts);
    warn_line(key, line.str());
  } catch (...) {
    swallowed("the warning sink");
  }
}

// Warnings said and held back since the process started (tests, the report's footer).
struct WarningCounts {
  std::int64_t said = 0;
  std::int64_t held_back = 0;
  std::int64_t swallowed = 0;
};
WarningCounts warning_counts() noexcept;

// Says, once for each key that was held back, how many more there were; a session calls it at
// its end so nothing is silently lost.
void flush_held_back_warnings() noexcept;

// Routes the process's warnings to handler while it lives; restores the previous route after.
class WarningRedirect {
 public:
  explicit WarningRedirect(WarningHandler handler);
  ~WarningRedirect();
  WarningRedirect(const WarningRedirect&) = delete;
  WarningRedirect& operator=(const WarningRedirect&) = delete;

 private:
  std::uint64_t id_ = 0;
};

// A session's warnings: its Options::warnings handler (when set) for its lifetime, and at its end
// the count of every kind it held back, so nothing is silently lost.
class WarningScope {
 public:
  explicit WarningScope(const WarningHandler& handler);
  ~WarningScope();
  WarningScope(const WarningScope&) = delete;
  WarningScope& operator=(const WarningScope&) = delete;

 private:
  std::optional<WarningRedirect> redirect_;
};

}  // namespace fathom::detail
