// Mixed precision on the example CNN: training throughput in fp32, with hand-written AMP
// (fathom::AutocastScope around forward, fathom::GradScaler when fp16), and with fathom's
// automatic AMP (Mode::Auto: fp32 warm-up, then autocast, watched, kept only when the loss keeps
// the fp32 trend and the steps are not slower). Rounds alternate the variants so that drifting
// machine load hits all of them; the table gives each one's median samples/s and its ratio to fp32.
//
//   amp_bench [--device cpu|cuda] [--batch N] [--steps N] [--rounds N]
#include <fathom/fathom.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

// The example's model (examples/cnn/train_cnn.cpp), copied so the benchmark stands alone.
torch::nn::Sequential make_cnn() {
  using namespace torch::nn;
  return Sequential(Conv2d(Conv2dOptions(3, 32, 3).padding(1)), BatchNorm2d(32), ReLU(),
                    MaxPool2d(2), Conv2d(Conv2dOptions(32, 64, 3).padding(1)), BatchNorm2d(64),
                    ReLU(), MaxPool2d(2), Conv2d(Conv2dOptions(64, 128, 3).padding(1)),
                    BatchNorm2d(128), ReLU(), AdaptiveAvgPool2d(1), Flatten(), Linear(128, 10));
}

struct Args {
  std::string device;
  int batch = 32;
  int steps = 20;  // timed steps per round
  int rounds = 3;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--device")
      a.device = v;
    else if (k == "--batch")
      a.batch = std::stoi(v);
    else if (k == "--steps")
      a.steps = std::stoi(v);
    else if (k == "--rounds")
      a.rounds = std::stoi(v);
    else
      throw std::invalid_argument("unknown argument " + k +
                                  " (try --device, --batch, --steps, --rounds)");
  }
  return a;
}

// Synthetic CIFAR-sized images (the example's data), made once and reused.
struct Data {
  std::vector<torch::Tensor> x, y;
  Data(int batches, int batch, torch::Device device) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
    for (int b = 0; b < batches; ++b) {
      auto labels = torch::randint(0, 10, {batch}, gen, torch::kLong);
      auto images = torch::randn({batch, 3, 32, 32}, gen) * 0.5;
      for (int i = 0; i < batch; ++i) {
        const auto label = labels[i].item<std::int64_t>();
        images[i][label % 3] += static_cast<double>(label) / 5.0;
      }
      x.push_back(images.to(device));
      y.push_back(labels.to(device));
    }
  }
};

void sync(torch::Device d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

struct Trainer {
  torch::nn::Sequential model{nullptr};
  std::unique_ptr<torch::optim::SGD> optimizer;
  int next = 0;
  explicit Trainer(torch::Device d) {
    torch::manual_seed(0);
    model = make_cnn();
    model->to(d);
    optimizer = std::make_unique<torch::optim::SGD>(model->parameters(),
                                                    torch::optim::SGDOptions(0.05).momentum(0.9));
  }
};

struct Variant {
  std::string name;
  std::function<void(int steps)> run;  // trains `steps` steps
  std::vector<double> samples_per_s;
};

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  const bool cuda = args.device.empty() ? torch::cuda::is_available() : args.device == "cuda";
  const torch::Device device = cuda ? torch::kCUDA : torch::kCPU;
  const c10::DeviceType type = device.type();
  const c10::ScalarType low = fathom::default_autocast_dtype(type);
  const bool fp16 = low == torch::kHalf;
  Data data(16, args.batch, device);
  namespace F = torch::nn::functional;

  Trainer plain(device), manual(device), automatic(device);
  fathom::GradScaler scaler(fathom::GradScalerOptions().enabled(fp16));
  const std::string report_dir =
      fathom::fs::temp_directory() + "/fathom-amp-bench-" + std::to_string(::getpid());
  fathom::Session session(fathom::Options()
                              .mode(fathom::Mode::Auto)
                              .report_dir(report_dir)
                              .run_name("amp_bench")
                              .print_report(false));
  session.watch(*automatic.model);

  std::vector<Variant> variants;
  variants.push_back({"fp32", [&](int steps) {
                        for (int s = 0; s < steps; ++s, ++plain.next) {
                          const int b = plain.next % 16;
                          plain.optimizer->zero_grad();
                          F::cross_entropy(plain.model->forward(data.x[b]), data.y[b]).backward();
                          plain.optimizer->step();
                        }
                      }});
  variants.push_back({"hand-written amp", [&](int steps) {
                        for (int s = 0; s < steps; ++s, ++manual.next) {
                          const int b = manual.next % 16;
                          torch::Tensor loss;
                          {
                            fathom::AutocastScope autocast(type, low);
                            loss = F::cross_entropy(manual.model->forward(data.x[b]), data.y[b]);
                          }
                          manual.optimizer->zero_grad();
                          scaler.scale(loss).backward();
                          scaler.step(*manual.optimizer);
                          scaler.update();
                        }
                      }});
  variants.push_back({"fathom auto amp", [&](int steps) {
                        auto e = session.epoch();
                        for (int s = 0; s < steps; ++s, ++automatic.next) {
                          const int b = automatic.next % 16;
                          auto step = e.step(args.batch);
                          torch::Tensor loss;
                          {
                            auto f = step.forward();
                            loss = F::cross_entropy(fathom::forward(automatic.model, data.x[b]),
                                                    data.y[b]);
                          }
                          {
                            auto bw = step.backward();
                            automatic.optimizer->zero_grad();
                            step.scaled(loss).backward();
                          }
                          {
                            auto o = step.optimizer();
                            step.apply(*automatic.optimizer);
                          }
                        }
                      }});

  // Untimed: allocator and kernel warm-up for all, and Auto mode's decision (20 fp32 warm-up
  // steps, 30 watched) for fathom's.
  const fathom::AutoAmpOptions policy;
  for (auto& v : variants)
    v.run(v.name == "fathom auto amp" ? policy.warmup_steps + policy.watch_steps + 2 : 3);
  sync(device);

  for (int r = 0; r < args.rounds; ++r) {
    for (auto& v : variants) {
      sync(device);
      const auto t0 = std::chrono::steady_clock::now();
      v.run(args.steps);
      sync(device);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      v.samples_per_s.push_back(args.steps * args.batch / s);
    }
  }

  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf(
      "amp_bench: example CNN on %s (%s autocast%s), batch %d, %d timed steps x %d rounds\n",
      device.str().c_str(), std::string(fathom::short_dtype_name(low)).c_str(),
      fp16 ? " + GradScaler" : "", args.batch, args.steps, args.rounds);
  const double base = median(variants[0].samples_per_s);
  std::printf("  %-18s %12s %12s\n", "variant", "samples/s", "vs fp32");
  for (const auto& v : variants)
    std::printf("  %-18s %12.1f %11.2fx\n", v.name.c_str(), median(v.samples_per_s),
                median(v.samples_per_s) / base);
  const fathom::RunReport& report = session.report();
  if (!report.epochs.empty() && report.epochs.back().mixed_precision) {
    const fathom::MixedPrecisionSummary& m = *report.epochs.back().mixed_precision;
    std::printf("  fathom auto amp ended %s", m.state.c_str());
    for (const auto& e : report.epochs)
      for (const auto& ev : e.mixed_precision->events)
        std::printf("\n    step %lld %s: %s", static_cast<long long>(ev.step), ev.kind.c_str(),
                    ev.detail.c_str());
    std::printf("\n");
  }
  fathom::fs::remove_tree(report_dir);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "amp_bench: %s\n", e.what());
  return 2;
}
