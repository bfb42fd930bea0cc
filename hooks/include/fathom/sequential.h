#pragma once
// LibTorch modules have no forward hooks, so fathom cannot see a Sequential's items run by
// itself. forward(seq, x) runs the items one by one, each inside its module range; it computes
// exactly what seq->forward(x) computes.
#include <torch/nn/modules/container/sequential.h>

#include <fathom/session.h>

namespace fathom {

at::Tensor forward(torch::nn::Sequential& seq, const at::Tensor& input);

}  // namespace fathom
