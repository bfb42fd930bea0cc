#include "formats/nsight/op_range_text.h"

#include <charconv>

namespace fathom::detail {
namespace {

bool read_int(std::string_view& s, std::int64_t& v) noexcept {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc()) return false;
  s.remove_prefix(static_cast<std::size_t>(p - s.data()));
  return true;
}

// "[[64, 128], [], [3]]" at the front of s. A malformed list gives no shapes rather than half.
std::vector<std::vector<std::int64_t>> read_shapes(std::string_view s) {
  std::vector<std::vector<std::int64_t>> out;
  if (s.empty() || s.front() != '[') return {};
  s.remove_prefix(1);
  while (!s.empty()) {
    while (!s.empty() && (s.front() == ' ' || s.front() == ',')) s.remove_prefix(1);
    if (s.empty()) return {};
    if (s.front() == ']') return out;
    if (s.front() != '[') return {};
    s.remove_prefix(1);
    std::vector<std::int64_t> dims;
    while (true) {
      while (!s.empty() && (s.front() == ' ' || s.front() == ',')) s.remove_prefix(1);
      if (s.empty()) return {};
      if (s.front() == ']') {
        s.remove_prefix(1);
        break;
      }
      std::int64_t d = 0;
      if (!read_int(s, d)) return {};
      dims.push_back(d);
    }
    out.push_back(std::move(dims));
  }
  return {};
}

}  // namespace

std::string_view op_range_base_name(std::string_view text) noexcept {
  const std::size_t comma = text.find(", ");
  const std::size_t bracket = text.find(" [");
  return text.substr(0, std::min(comma, bracket));
}

std::optional<OpRangeText> parse_op_range_text(std::string_view text) {
  const std::string_view base = op_range_base_name(text);
  std::string_view rest = text.substr(base.size());
  if (base.empty()) return std::nullopt;
  const bool qualified = base.find("::") != std::string_view::npos;
  if (!qualified && rest.empty()) return std::nullopt;
  OpRangeText out;
  out.name = std::string(base);
  bool op_part = qualified;
  while (!rest.empty()) {
    if (rest.substr(0, 2) == ", ") {
      rest.remove_prefix(2);
      if (rest.substr(0, 6) == "seq = ") {
        rest.remove_prefix(6);
        if (!read_int(rest, out.sequence_nr)) out.sequence_nr = -1;
        op_part = true;
      } else if (rest.substr(0, 8) == "sizes = ") {
        rest.remove_prefix(8);
        out.input_shapes = read_shapes(rest);
        op_part = true;
        break;  // what follows (input_op_ids) is not needed
      } else if (rest.substr(0, 8) == "op_id = ") {
        op_part = true;
        rest.remove_prefix(8);
        std::int64_t ignored = 0;
        read_int(rest, ignored);
      } else {
        break;
      }
    } else if (rest.substr(0, 2) == " [") {
      out.input_shapes = read_shapes(rest.substr(1));
      op_part = true;
      break;
    } else {
      break;
    }
  }
  if (!op_part) return std::nullopt;
  return out;
}

}  // namespace fathom::detail
