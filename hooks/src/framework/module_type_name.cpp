#include "framework/module_type_name.h"

#include <cctype>

namespace fathom::detail {
namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The last component of a qualified name, without LibTorch's "Impl" (the holder's name is the
// one users write).
std::string last_component(std::string_view qualified) {
  const auto colon = qualified.rfind("::");
  std::string s(colon == std::string_view::npos ? qualified : qualified.substr(colon + 2));
  if (s.size() > 4 && s.compare(s.size() - 4, 4, "Impl") == 0) s.resize(s.size() - 4);
  return s;
}

}  // namespace

std::string short_type_name(std::string_view type_name) {
  constexpr std::string_view kAnonymous = "(anonymous namespace)::";
  std::string out;
  std::size_t i = 0;
  while (i < type_name.size()) {
    if (type_name.substr(i, kAnonymous.size()) == kAnonymous) {
      i += kAnonymous.size();
      continue;
    }
    if (!name_char(type_name[i]) && type_name[i] != ':') {
      out += type_name[i++];
      continue;
    }
    // One qualified name: identifiers joined by "::".
    const std::size_t begin = i;
    while (i < type_name.size() && (name_char(type_name[i]) || type_name[i] == ':')) ++i;
    // A "(anonymous namespace)::" inside a qualified name continues it.
    while (type_name.substr(i, kAnonymous.size()) == kAnonymous) {
      i += kAnonymous.size();
      while (i < type_name.size() && (name_char(type_name[i]) || type_name[i] == ':')) ++i;
    }
    out += last_component(type_name.substr(begin, i - begin));
  }
  return out;
}

}  // namespace fathom::detail
