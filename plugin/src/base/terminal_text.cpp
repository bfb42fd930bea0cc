#include "base/terminal_text.h"

#include <fmt/format.h>
#include <linux/limits.h>

#include <algorithm>

namespace fathom::detail {

std::size_t bidi_control_at(std::string_view text, std::size_t at) noexcept {
  if (at + 2 >= text.size() || static_cast<unsigned char>(text[at]) != 0xE2) return 0;
  const auto b1 = static_cast<unsigned char>(text[at + 1]);
  const auto b2 = static_cast<unsigned char>(text[at + 2]);
  if (b1 == 0x80 && b2 >= 0xAA && b2 <= 0xAE) return 3;  // U+202A..U+202E: embeddings, overrides
  if (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9) return 3;  // U+2066..U+2069: isolates
  return 0;
}

std::string terminal_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || c == '\t') {
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      fmt::format_to(std::back_inserter(out), "\\x{:02x}", c);
    } else if (c == 0xC2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
      // C1 controls in UTF-8 (U+0080..U+009F): CSI and OSC start sequences in some terminals.
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned char>(text[i + 1]));
      ++i;
    } else if (bidi_control_at(text, i)) {
      const unsigned code = ((c & 0x0Fu) << 12) |
                            ((static_cast<unsigned char>(text[i + 1]) & 0x3Fu) << 6) |
                            (static_cast<unsigned char>(text[i + 2]) & 0x3Fu);
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", code);
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string echoed_value(std::string_view value, std::size_t max_bytes) {
  std::size_t cut = std::min(value.size(), max_bytes);
  // Back to the start of a character: half of one would read as a stray byte.
  while (cut > 0 && cut < value.size() && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80)
    --cut;
  std::string out;
  for (char c : terminal_safe(value.substr(0, cut))) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else
      out += c;
  }
  if (cut < value.size()) fmt::format_to(std::back_inserter(out), "... ({} bytes)", value.size());
  return out;
}

std::string printed_path(std::string_view path) { return echoed_value(path, PATH_MAX); }

}  // namespace fathom::detail
