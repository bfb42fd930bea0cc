#pragma once
// The one live line fathom may draw on standard error: the progress line (Options::progress).
// Everything else fathom writes there (warnings, the epoch summary) goes through a
// StatusLinePause, which clears the line first and draws it again after, so fathom's own output
// is never glued to it.
#include <string>

namespace fathom::detail {

// Draws text as the status line ("\r", the text, "clear to the end of the line") and keeps it.
void show_status_line(const std::string& text) noexcept;
// Clears the line and forgets it (the epoch ended, the session is gone).
void hide_status_line() noexcept;

class StatusLinePause {
 public:
  StatusLinePause() noexcept;
  ~StatusLinePause();
  StatusLinePause(const StatusLinePause&) = delete;
  StatusLinePause& operator=(const StatusLinePause&) = delete;

 private:
  bool was_shown_ = false;
};

}  // namespace fathom::detail
