#include <fathom/sequential.h>

#include "checkpoint/chain_runner.h"

namespace fathom {

at::Tensor forward(torch::nn::Sequential& seq, const at::Tensor& input) {
  return detail::run_sequential(seq, input, nullptr);
}

at::Tensor forward(torch::nn::Sequential& seq, const at::Tensor& input,
                   const std::vector<CheckpointSegment>& checkpointed) {
  return detail::run_sequential(seq, input, &checkpointed);
}

}  // namespace fathom
