#include <fathom/error.h>
#include <fathom/run_main.h>

#include <cstdio>
#include <exception>

namespace fathom::detail {

int run_guarded(const std::function<int()>& body) noexcept {
  // stdio, not iostream: the message must get out even when the error was a failed allocation.
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());  // fathom's messages start with "fathom: "
    return kExitFathomError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitOtherError;
  } catch (...) {
    std::fprintf(stderr, "error: an exception that is not a std::exception left main\n");
    return kExitOtherError;
  }
}

}  // namespace fathom::detail
