#pragma once
// The top of a training program, for programs that catch nothing themselves:
//
//   int main() {
//     return fathom::run_main([] { /* the session and the training loop */ });
//   }
//
// An exception that leaves the body would otherwise end in std::terminate (an abort and a core
// dump, exit status 134), and without a handler the stack may not even unwind, so the epoch's
// report would be lost. run_main catches it after every scope has closed (the report is written)
// and prints one line to standard error:
//   fathom::Error (a bad FATHOM_* value, an unwritable report folder)  "fathom: ..."   status 2
//   any other exception (yours, LibTorch's)                            "error: ..."    status 1
// The body may return an int (the status when nothing is thrown) or nothing (status 0).
#include <concepts>
#include <functional>
#include <type_traits>

namespace fathom {

inline constexpr int kExitFathomError = 2;
inline constexpr int kExitOtherError = 1;

namespace detail {
int run_guarded(const std::function<int()>& body) noexcept;  // run_main.cpp
}

// Runs body and returns its status, or the status of the exception that left it.
template <typename Body>
requires std::invocable<Body&>
int run_main(Body&& body) noexcept {
  return detail::run_guarded([&body]() -> int {
    if constexpr (std::is_void_v<std::invoke_result_t<Body&>>) {
      body();
      return 0;
    } else {
      return static_cast<int>(body());
    }
  });
}

}  // namespace fathom
