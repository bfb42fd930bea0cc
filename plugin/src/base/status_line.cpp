#include "base/status_line.h"

#include <unistd.h>

#include <iostream>
#include <mutex>

namespace fathom::detail {
namespace {

struct Line {
  std::mutex mu;
  std::string text;  // empty: none shown
};

Line& line() noexcept {
  static Line* l = new Line;  // never destroyed: warnings may come from threads at exit
  return *l;
}

// One write(2) a redraw: a line drawn in pieces flickers, and stderr is unbuffered.
void put(const std::string& s) noexcept {
  std::cerr.flush();
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(STDERR_FILENO, s.data() + done, s.size() - done);
    if (n <= 0) return;  // a closed or full stderr loses the line, nothing else
    done += static_cast<std::size_t>(n);
  }
}

constexpr const char* kClear = "\r\x1b[K";

}  // namespace

void show_status_line(const std::string& text) noexcept {
  Line& l = line();
  try {
    std::lock_guard lock(l.mu);
    l.text = text;
    put(kClear + text);
  } catch (...) {
  }
}

void hide_status_line() noexcept {
  Line& l = line();
  std::lock_guard lock(l.mu);
  if (l.text.empty()) return;
  l.text.clear();
  try {
    put(kClear);
  } catch (...) {
  }
}

StatusLinePause::StatusLinePause() noexcept {
  Line& l = line();
  std::lock_guard lock(l.mu);
  if (l.text.empty()) return;
  was_shown_ = true;
  try {
    put(kClear);
  } catch (...) {
  }
}

StatusLinePause::~StatusLinePause() {
  if (!was_shown_) return;
  Line& l = line();
  std::lock_guard lock(l.mu);
  if (l.text.empty()) return;  // hidden meanwhile
  try {
    std::cerr.flush();
    put(kClear + l.text);
  } catch (...) {
  }
}

}  // namespace fathom::detail
