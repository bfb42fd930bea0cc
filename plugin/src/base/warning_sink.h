#pragma once
// The one place fathom's warnings go. A feature that fails says so here and keeps the training
// running; the report says what was not measured. Every warning is rate-limited per key (the
// first kWarningsPerKey are said, the rest counted and summed up once), and goes to standard
// error unless a session's Options::warnings handler redirects it.
//
// The sink is process-wide on purpose: CUPTI and NVML report from their own threads, outside any
// session. A session installs its handler for its lifetime (WarningRedirect), last in first out.
#include <fathom/options.h>

#include <concepts>
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
// same key are one kind, rate-limited together, and summed up under label (the key when empty).
// Never throws.
void warn_line(std::string_view key, std::string_view message,
               std::string_view label = {}) noexcept;

// The message built from parts as a stream would print them, under an explicit key:
// warn_as(cupti_function_name(f), ...) makes each CUPTI function's failures one kind.
template <typename... Parts>
void warn_as(std::string_view key, const Parts&... parts) noexcept {
  try {
    std::ostringstream line;
    (line << ... << parts);
    warn_line(key, line.str());
  } catch (...) {
    swallowed("the warning sink");
  }
}

// The file and line of a call, as std::source_location gives them. Its own type because clang
// before 15 cannot compile libstdc++'s <source_location> (no __builtin_source_location), and the
// sanitizer and fuzzer builds use clang 14; the builtins below give the same place with any
// compiler, evaluated where the default argument is used: at the call.
struct CallSite {
  static constexpr CallSite current(const char* file = __builtin_FILE(),
                                    unsigned line = __builtin_LINE()) noexcept {
    return CallSite{file, line};
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr unsigned line() const noexcept { return line_; }
  const char* file_;
  unsigned line_;
};

// A warning's first part, and the place in fathom that says it: that place is the warning's
// kind, so two different warnings are never rate-limited together and no call names a key.
struct WarningStart {
  template <typename T>
  requires std::convertible_to<const T&, std::string_view> WarningStart(
      const T& text, CallSite where = CallSite::current())
      : text(text), where(where) {}
  std::string_view text;
  CallSite where;
};

// warn("the device could not be synchronized: ", e.what())
template <typename... Parts>
void warn(WarningStart start, const Parts&... rest) noexcept {
  try {
    const std::string key =
        std::string(start.where.file_name()) + ":" + std::to_string(start.where.line());
    std::ostringstream line;
    line << start.text;
    if constexpr (sizeof...(rest) > 0) (line << ... << rest);  // none: a fold of nothing
    // The summary names the kind by the words it starts with: "could not release cached memory".
    std::string_view label = start.text;
    while (!label.empty() && (label.back() == ' ' || label.back() == ':')) label.remove_suffix(1);
    warn_line(key, line.str(), label);
  } catch (...) {
    swallowed("the warning sink");
  }
}

// Warnings said and held back since the process started (for tests).
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
