#include <fathom/error.h>
#include <fathom/run_main.h>

#include <cstdio>
#include <exception>

#include "base/terminal_text.h"

namespace fathom::detail {
namespace {

// The message escaped (its paths and values are the user's, and may hold escape sequences), or
// as it is when there is no memory to escape it.
void print_error(const char* prefix, const char* what) noexcept {
  try {
    std::fprintf(stderr, "%s%s\n", prefix, terminal_safe(what).c_str());
  } catch (...) {
    std::fprintf(stderr, "%s%s\n", prefix, what);
  }
}

}  // namespace

int run_guarded(const std::function<int()>& body) noexcept {
  // stdio, not iostream: the message must get out even when the error was a failed allocation.
  try {
    return body();
  } catch (const Error& e) {
    print_error("", e.what());  // fathom's messages start with "fathom: "
    return kExitFathomError;
  } catch (const std::exception& e) {
    print_error("error: ", e.what());
    return kExitOtherError;
  } catch (...) {
    std::fprintf(stderr, "error: an exception that is not a std::exception left main\n");
    return kExitOtherError;
  }
}

}  // namespace fathom::detail
