#pragma once
#include <string>

namespace fathom {

// Something fathom could not measure in this run, and why. Reports print these plainly instead
// of a number.
struct Unmeasured {
  std::string what;
  std::string why;
};

}  // namespace fathom
