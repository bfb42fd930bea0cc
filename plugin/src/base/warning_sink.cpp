#include "base/warning_sink.h"

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/status_line.h"
#include "base/terminal_text.h"

namespace fathom::detail {
namespace {

struct Route {
  std::uint64_t id;
  WarningHandler handler;
};

struct Sink {
  std::mutex mu;
  struct Kind {
    std::int64_t count = 0;  // how many came
    std::string label;       // what the summary calls them
  };
  std::map<std::string, Kind, std::less<>> seen;  // per key
  std::vector<Route> routes;                      // innermost last
  std::uint64_t next_id = 1;
  std::atomic<std::int64_t> said{0}, held_back{0}, swallowed{0};
};

Sink& sink() noexcept {
  static Sink* s = new Sink;  // never destroyed: warnings may come from threads at exit
  return *s;
}

// The route in force (under the sink's lock): a copy, so that the handler runs unlocked and may
// itself call into fathom.
WarningHandler route(Sink& s) {
  return s.routes.empty() ? WarningHandler{} : s.routes.back().handler;
}

// The only write to standard error in fathom's libraries.
void say(const WarningHandler& handler, const std::string& whole) {
  // A caught fathom::Error's text starts with the prefix the sink adds itself.
  std::string_view rest = whole;
  constexpr std::string_view kPrefix = "fathom: ";
  if (rest.substr(0, kPrefix.size()) == kPrefix) rest.remove_prefix(kPrefix.size());
  // Warnings name paths, run names and kernel names fathom did not choose: one escape in them
  // could rewrite the user's terminal.
  const std::string line = terminal_safe(rest);
  if (handler) {
    handler(line);
    return;
  }
  const StatusLinePause pause;  // the progress line, cleared and drawn again below the warning
  std::cerr << kPrefix << line << "\n";
  std::cerr.flush();
}

}  // namespace

void warn_line(std::string_view key, std::string_view message, std::string_view label) noexcept {
  Sink& s = sink();
  try {
    WarningHandler handler;
    {
      std::lock_guard lock(s.mu);
      auto it = s.seen.find(key);
      if (it == s.seen.end())
        it = s.seen
                 .emplace(std::string(key), Sink::Kind{0, std::string(label.empty() ? key : label)})
                 .first;
      if (++it->second.count > kWarningsPerKey) {
        s.held_back.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      handler = route(s);
    }
    s.said.fetch_add(1, std::memory_order_relaxed);
    say(handler, std::string(message));
  } catch (...) {
    // A handler that throws, or no memory for the line: the count is all that is left.
    s.swallowed.fetch_add(1, std::memory_order_relaxed);
  }
}

void swallowed(const char* where) noexcept {
  sink().swallowed.fetch_add(1, std::memory_order_relaxed);
  try {
    warn_line(where, std::string("an unexpected failure was ignored in ") + where +
                         " (training goes on; what it measured may be missing)");
  } catch (...) {
    // No memory for the sentence: the count taken above is what remains, and is reported.
  }
}

WarningCounts warning_counts() noexcept {
  Sink& s = sink();
  return {s.said.load(), s.held_back.load(), s.swallowed.load()};
}

void flush_held_back_warnings() noexcept {
  Sink& s = sink();
  try {
    std::vector<std::string> lines;
    WarningHandler handler;
    {
      std::lock_guard lock(s.mu);
      for (auto& [key, kind] : s.seen) {
        if (kind.count <= kWarningsPerKey) continue;
        lines.push_back(std::to_string(kind.count - kWarningsPerKey) + " more warning(s) like '" +
                        kind.label + "' were held back");
        kind.count = kWarningsPerKey;
      }
      handler = route(s);
    }
    for (const std::string& line : lines) say(handler, line);
  } catch (...) {
    s.swallowed.fetch_add(1, std::memory_order_relaxed);
  }
}

WarningRedirect::WarningRedirect(WarningHandler handler) {
  Sink& s = sink();
  std::lock_guard lock(s.mu);
  id_ = s.next_id++;
  s.routes.push_back({id_, std::move(handler)});
}

WarningRedirect::~WarningRedirect() {
  Sink& s = sink();
  std::lock_guard lock(s.mu);
  auto it =
      std::find_if(s.routes.begin(), s.routes.end(), [&](const Route& r) { return r.id == id_; });
  if (it != s.routes.end()) s.routes.erase(it);
}

WarningScope::WarningScope(const WarningHandler& handler) {
  if (handler) redirect_.emplace(handler);
}

WarningScope::~WarningScope() {
  flush_held_back_warnings();  // into this session's handler, before it is removed
}

}  // namespace fathom::detail
