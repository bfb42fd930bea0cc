#pragma once
// Text fathom did not write (kernel, module and op names from drivers and traces, the strings of a
// report file) reaches a terminal only through terminal_safe: an escape sequence in a name could
// set the window title, write the clipboard or hide lines.
#include <cstddef>
#include <string>
#include <string_view>

namespace fathom::detail {

// text with every control character but newline and tab (C0, DEL, the C1 range and the Unicode
// bidirectional overrides and isolates) written out as a visible \xNN or \uNNNN.
std::string terminal_safe(std::string_view text);

// The length (3) of the UTF-8 bidirectional override or isolate (U+202A..U+202E,
// U+2066..U+2069) that starts at text[at], or 0: they reorder what a reader sees around them.
std::size_t bidi_control_at(std::string_view text, std::size_t at) noexcept;

// A value fathom did not choose, echoed in a message (a bad FATHOM_* variable, a run name): its
// first kEchoedBytes bytes, cut at a character's start, with every control character newline and
// tab included written out as terminal_safe does, and "... (N bytes)" after a cut. A 100 KB or
// escape-laden value then costs one short line, and the message stays one line.
inline constexpr std::size_t kEchoedBytes = 64;
std::string echoed_value(std::string_view value, std::size_t max_bytes = kEchoedBytes);

// A path in a message: escaped as echoed_value, cut only past PATH_MAX (real paths are longer
// than a value's 64 bytes).
std::string printed_path(std::string_view path);

}  // namespace fathom::detail
