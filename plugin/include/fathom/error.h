#pragma once
// fathom's one error policy, for user mistakes: a fathom::Error whose message names the bad value
// and the fix. Vendor calls (CUPTI, NVML, CUDA) never throw: they log and return a status.
// Hot paths, destructors and vendor callbacks never throw.
#include <stdexcept>
#include <string>

namespace fathom {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error("fathom: " + what) {}
};

}  // namespace fathom
