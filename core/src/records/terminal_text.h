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

}  // namespace fathom::detail
