// Builds without NCCL headers: the example runs on Gloo only.
#include <stdexcept>

#include "process_group.h"

namespace examples {

bool nccl_built() noexcept { return false; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>&, int,
                                                    int, std::chrono::milliseconds) {
  throw std::invalid_argument("this build has no NCCL");
}

}  // namespace examples
