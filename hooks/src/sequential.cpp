#include <fathom/sequential.h>

namespace fathom {

at::Tensor forward(torch::nn::Sequential& seq, const at::Tensor& input) {
  at::Tensor x = input;
  for (auto& item : *seq) {
    ModuleScope range(*item.ptr());
    x = item.forward(x);
  }
  return x;
}

}  // namespace fathom
