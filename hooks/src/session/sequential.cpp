#include <fathom/amp.h>
#include <fathom/sequential.h>

#include "checkpoint/chain_runner.h"

namespace fathom {

at::Tensor forward(torch::nn::Sequential& seq, const at::Tensor& input) {
  // Under Auto's mixed precision an item that throws runs the Sequential again in fp32 (amp.h).
  return detail::amp_region([&] { return detail::run_sequential(seq, input, nullptr); });
}

at::Tensor forward(torch::nn::Sequential& seq, const at::Tensor& input,
                   const std::vector<CheckpointSegment>& checkpointed) {
  return detail::amp_region([&] { return detail::run_sequential(seq, input, &checkpointed); });
}

}  // namespace fathom

namespace fathom {

at::Tensor forward(torch::nn::Sequential& seq, const at::Tensor& input,
                   const std::vector<CheckpointSegment>& checkpointed,
                   const CheckpointOptions& selective) {
  return detail::amp_region(
      [&] { return detail::run_sequential(seq, input, &checkpointed, &selective); });
}

}  // namespace fathom
