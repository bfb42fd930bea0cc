#include "base/kernel_name.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace fathom {

std::string_view kernel_name_prefix(std::string_view name) noexcept {
  return name.substr(0, kKernelNameBytes);
}

std::string normalize_kernel_name(std::string_view name) {
  const std::string_view prefix = kernel_name_prefix(name);
  if (prefix.size() > 2 && prefix.substr(0, 2) == "_Z") {
    // __cxa_demangle wants a NUL-terminated string; a name cut short does not demangle (status
    // -2) and stays as it is. A NUL inside is also the end for the demangler: then it fails too.
    const std::string mangled(prefix);
    int status = 0;
    const std::unique_ptr<char, decltype(&std::free)> out(
        abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), &std::free);
    if (status == 0 && out) return std::string(kernel_name_prefix(out.get()));
    // Out of memory (status -1) is thrown as such: the caller counts the record as dropped.
    if (status == -1) throw std::bad_alloc();
  }
  return std::string(prefix);
}

std::string_view without_parameters(std::string_view name) noexcept {
  // The parameter list is the last top-level parenthesized group, closing at the name's end
  // (a demangled const member would end in " const"; kernels are free functions). Parentheses
  // inside template arguments ("(int)128", "[lambda(float) (instance 1)]", "(anonymous
  // namespace)") are at a deeper angle-bracket level or closed before the end.
  if (name.empty() || name.back() != ')') return name;
  int depth = 0;
  for (std::size_t i = name.size(); i-- > 0;) {
    const char c = name[i];
    if (c == ')') {
      ++depth;
    } else if (c == '(') {
      if (--depth == 0) {
        const std::string_view head = name.substr(0, i);
        // No template arguments before it: the parameters are all the name says.
        if (head.empty() || head.back() != '>') return name;
        return head;
      }
    }
  }
  return name;
}

}  // namespace fathom
