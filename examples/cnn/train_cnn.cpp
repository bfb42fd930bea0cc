// Vision: a ResNet-style CNN trained on synthetic images under fathom. The loop a LibTorch user
// already has, plus the handful of lines fathom needs (marked "fathom:").
//
//   train_cnn [--epochs N] [--steps N] [--batch N] [--device cpu|cuda] [--large]
//   [--fail-in-forward]
//
// Default: a ResNet-8 (16-32-64 channels) on 32x32 images, batch 32 — a minute on a laptop CPU.
// --large: a ResNet-18 (64-512 channels) on 64x64 images, batch 256 — for a GPU.
#include <fathom/fathom.h>
#include <torch/torch.h>

#include <iostream>
#include <string>
#include <vector>

#include "example_args.h"
#include "progress.h"
#include "resnet.h"

namespace {

// Synthetic images whose class is encoded in the mean of one channel, so the loss really falls.
// Made on the fly per sample, like a decoding dataset: the data phase is real work.
class SyntheticImages : public torch::data::datasets::Dataset<SyntheticImages> {
 public:
  SyntheticImages(std::int64_t size, std::int64_t side) : size_(size), side_(side) {}
  torch::data::Example<> get(std::size_t index) override {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(index));
    const std::int64_t label = static_cast<std::int64_t>(index % 10);
    auto image = torch::randn({3, side_, side_}, gen) * 0.5;
    image[label % 3] += static_cast<double>(label) / 5.0;
    return {image, torch::tensor(label)};
  }
  torch::optional<std::size_t> size() const override { return size_; }

 private:
  std::int64_t size_, side_;
};

}  // namespace

int main(int argc, char** argv) try {
  examples::Args defaults;
  defaults.steps = 40;
  const auto args = examples::parse_args(argc, argv, defaults, {"--fail-in-forward"});
  const int batch = args.batch ? args.batch : args.large ? 256 : 32;
  const std::int64_t side = args.large ? 64 : 32;
  torch::manual_seed(0);
  const torch::Device device = args.pick_device();

  auto model =
      args.large ? examples::make_resnet(64, {2, 2, 2, 2}) : examples::make_resnet(16, {1, 1, 1});
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  auto loader = torch::data::make_data_loader(
      SyntheticImages(static_cast<std::int64_t>(args.steps) * batch, side)
          .map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(batch));

  fathom::Session session(
      fathom::Options().report_dir("reports").run_name("train_cnn"));  // fathom:
  session.watch(*model);                                               // fathom:
  session.watch(optimizer);  // fathom: its state bytes, for the report's hardware fit

  for (int epoch = 0; epoch < args.epochs; ++epoch) {
    auto e = session.epoch();  // fathom: the report is written when e ends
    examples::Progress progress("img", device, epoch, args.steps);
    int step_index = 0;
    for (auto& batch_data : *loader) {
      auto step = e.step(batch_data.data.size(0));       // fathom:
      auto x = step.to_device(batch_data.data, device);  // fathom: instead of batch.data.to(device)
      auto y = step.to_device(batch_data.target, device);
      torch::Tensor loss;
      {
        auto f = step.forward();  // fathom:
        if (args.has("--fail-in-forward") && epoch == 0 && step_index == 3)
          throw std::runtime_error("injected failure in forward");
        loss = torch::nn::functional::cross_entropy(fathom::forward(model, x), y);
      }
      {
        auto b = step.backward();  // fathom:
        optimizer.zero_grad();
        step.scaled(loss).backward();  // fathom: the loss, scaled when fp16 mixed precision runs
      }
      {
        auto o = step.optimizer();  // fathom:
        step.apply(optimizer);      // fathom: optimizer.step(), skipped on inf/NaN gradients
      }
      progress.update(step_index++, x.size(0), loss.detach());
    }
    progress.finish();
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "train_cnn: " << e.what() << "\n";
  return 2;
}
