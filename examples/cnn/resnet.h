#pragma once
// The vision example's model, a ResNet for CIFAR-sized images (3 stages: ResNet-8 with one block a
// stage, ResNet-18 with four stages of two), shared with bench/overhead_bench.cpp so the overhead
// benchmark measures the very loop the example runs.
#include <fathom/sequential.h>
#include <torch/torch.h>

#include <vector>

namespace examples {

// conv-bn-relu-conv-bn plus a shortcut, as in He et al. (2015). LibTorch modules have no forward
// hooks: fathom::forward runs a Sequential item by item, each in its module range.
struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(std::int64_t in, std::int64_t out, std::int64_t stride) {
    using namespace torch::nn;
    body = register_module(
        "body",
        Sequential(Conv2d(Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)),
                   BatchNorm2d(out), ReLU(),
                   Conv2d(Conv2dOptions(out, out, 3).padding(1).bias(false)), BatchNorm2d(out)));
    if (stride != 1 || in != out)
      shortcut = register_module(
          "shortcut", Sequential(Conv2d(Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                                 BatchNorm2d(out)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = fathom::forward(body, x);  // fathom: module ranges inside the block
    auto s = shortcut ? fathom::forward(shortcut, x) : x;
    return torch::relu(y + s);
  }
  torch::nn::Sequential body{nullptr}, shortcut{nullptr};
};
TORCH_MODULE(BasicBlock);

inline torch::nn::Sequential make_resnet(std::int64_t width,
                                         const std::vector<int>& blocks_per_stage) {
  using namespace torch::nn;
  Sequential net(Conv2d(Conv2dOptions(3, width, 3).padding(1).bias(false)), BatchNorm2d(width),
                 ReLU());
  std::int64_t in = width;
  for (std::size_t stage = 0; stage < blocks_per_stage.size(); ++stage) {
    const std::int64_t out = width << stage;
    for (int b = 0; b < blocks_per_stage[stage]; ++b) {
      net->push_back(BasicBlock(in, out, stage > 0 && b == 0 ? 2 : 1));
      in = out;
    }
  }
  net->push_back(AdaptiveAvgPool2d(1));
  net->push_back(Flatten());
  net->push_back(Linear(in, 10));
  return net;
}

}  // namespace examples
