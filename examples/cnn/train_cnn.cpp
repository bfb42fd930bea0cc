// A small CNN trained on synthetic images under fathom: the loop a LibTorch user already has,
// plus the handful of lines that fathom needs (marked "fathom:").
//
//   train_cnn [--epochs N] [--steps N] [--batch N] [--device cpu|cuda]
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include <fathom/fathom.h>

namespace {

struct Args {
  int epochs = 2;
  int steps = 40;
  int batch = 32;
  std::string device;  // empty: cuda when available
  bool fail_in_forward = false;  // throws in one forward pass, to show the report survives
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
      return argv[++i];
    };
    if (k == "--epochs") a.epochs = std::stoi(value());
    else if (k == "--steps") a.steps = std::stoi(value());
    else if (k == "--batch") a.batch = std::stoi(value());
    else if (k == "--device") a.device = value();
    else if (k == "--fail-in-forward") a.fail_in_forward = true;
    else throw std::invalid_argument("unknown argument " + k + " (try --epochs, --steps, --batch, --device)");
  }
  return a;
}

// Synthetic CIFAR-sized images whose class is encoded in the mean of one channel, so the loss
// really falls.
class SyntheticImages : public torch::data::datasets::Dataset<SyntheticImages> {
 public:
  explicit SyntheticImages(std::int64_t size) : size_(size) {}
  torch::data::Example<> get(std::size_t index) override {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(index));
    const std::int64_t label = static_cast<std::int64_t>(index % 10);
    auto image = torch::randn({3, 32, 32}, gen) * 0.5;
    image[label % 3] += static_cast<double>(label) / 5.0;
    return {image, torch::tensor(label)};
  }
  torch::optional<std::size_t> size() const override { return size_; }

 private:
  std::int64_t size_;
};

torch::nn::Sequential make_cnn() {
  using namespace torch::nn;
  return Sequential(
      Conv2d(Conv2dOptions(3, 32, 3).padding(1)), BatchNorm2d(32), ReLU(), MaxPool2d(2),
      Conv2d(Conv2dOptions(32, 64, 3).padding(1)), BatchNorm2d(64), ReLU(), MaxPool2d(2),
      Conv2d(Conv2dOptions(64, 128, 3).padding(1)), BatchNorm2d(128), ReLU(),
      AdaptiveAvgPool2d(1), Flatten(), Linear(128, 10));
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  torch::manual_seed(0);
  const bool cuda = args.device.empty() ? torch::cuda::is_available() : args.device == "cuda";
  const torch::Device device = cuda ? torch::kCUDA : torch::kCPU;

  auto model = make_cnn();
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  auto loader = torch::data::make_data_loader(
      SyntheticImages(static_cast<std::int64_t>(args.steps) * args.batch)
          .map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(args.batch));

  fathom::Session session(fathom::Options().report_dir("reports").run_name("train_cnn"));  // fathom:
  session.watch(*model);                                                                     // fathom:

  for (int epoch = 0; epoch < args.epochs; ++epoch) {
    auto e = session.epoch();  // fathom: the report is written when e ends
    double loss_sum = 0;
    int steps = 0;
    for (auto& batch : *loader) {
      auto step = e.step(batch.data.size(0));         // fathom:
      auto x = step.to_device(batch.data, device);     // fathom: instead of batch.data.to(device)
      auto y = step.to_device(batch.target, device);
      torch::Tensor loss;
      {
        auto f = step.forward();  // fathom:
        if (args.fail_in_forward && epoch == 0 && steps == 3) throw std::runtime_error("injected failure in forward");
        loss = torch::nn::functional::cross_entropy(fathom::forward(model, x), y);
      }
      {
        auto b = step.backward();  // fathom:
        optimizer.zero_grad();
        loss.backward();
      }
      {
        auto o = step.optimizer();  // fathom:
        optimizer.step();
      }
      loss_sum += loss.item<double>();
      ++steps;
    }
    std::cout << "epoch " << epoch << ": mean loss " << loss_sum / std::max(steps, 1) << "\n";
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "train_cnn: " << e.what() << "\n";
  return 2;
}
