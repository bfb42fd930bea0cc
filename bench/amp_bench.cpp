// Mixed precision on the vision example's ResNet (examples/cnn/resnet.h): training throughput in
// fp32, with hand-written AMP (fathom::AutocastScope around forward, fathom::GradScaler when fp16),
// and with fathom's automatic AMP (Mode::Auto: fp32 warm-up, then autocast, watched, kept only when
// the loss keeps the fp32 trend and the steps are not slower). The variants take turns one step at
// a time, so that a change in machine load hits all of them; the table gives each one's samples/s
// from its median step time, and the ratio to fp32.
//
//   amp_bench [--device cpu|cuda] [--batch N] [--steps N] [--large | --small]
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

#include "base/file_system.h"
#include "resnet.h"  // the vision example's model, shared with the other benchmarks

namespace {

struct Args {
  std::string device;
  int batch = 0;   // 0: the example's (32, or 256 with --large)
  int steps = 30;  // timed steps per variant
  int large = -1;  // the example's --large sizes (ResNet-18 on 64x64); default: on a GPU
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--large") {
      a.large = 1;
      continue;
    }
    if (k == "--small") {
      a.large = 0;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--device")
      a.device = v;
    else if (k == "--batch")
      a.batch = std::stoi(v);
    else if (k == "--steps")
      a.steps = std::stoi(v);
    else
      throw std::invalid_argument("unknown argument " + k +
                                  " (try --device, --batch, --steps, --large, --small)");
  }
  return a;
}

// Synthetic CIFAR-sized images (the example's data), made once and reused.
struct Data {
  std::vector<torch::Tensor> x, y;
  Data(int batches, int batch, std::int64_t side, torch::Device device) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
    for (int b = 0; b < batches; ++b) {
      auto labels = torch::randint(0, 10, {batch}, gen, torch::kLong);
      auto images = torch::randn({batch, 3, side, side}, gen) * 0.5;
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
  Trainer(torch::Device d, bool large) {
    torch::manual_seed(0);
    model = large ? examples::make_resnet(64, {2, 2, 2, 2}) : examples::make_resnet(16, {1, 1, 1});
    model->to(d);
    optimizer = std::make_unique<torch::optim::SGD>(model->parameters(),
                                                    torch::optim::SGDOptions(0.05).momentum(0.9));
  }
};

struct Variant {
  std::string name;
  std::function<void()> step;  // one training step
  std::vector<double> step_s;
};

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  const bool cuda = args.device.empty() ? torch::cuda::is_available() : args.device == "cuda";
  const torch::Device device = cuda ? torch::kCUDA : torch::kCPU;
  const c10::DeviceType type = device.type();
  const c10::ScalarType low = fathom::default_autocast_dtype(type);
  const bool fp16 = low == torch::kHalf;
  const bool large = args.large < 0 ? cuda : args.large == 1;
  const int batch = args.batch ? args.batch : large ? 256 : 32;
  Data data(16, batch, large ? 64 : 32, device);
  namespace F = torch::nn::functional;

  Trainer plain(device, large), manual(device, large), automatic(device, large);
  fathom::GradScaler scaler(fathom::GradScalerOptions().enabled(fp16));
  const std::string report_dir =
      fathom::fs::temp_directory() + "/fathom-amp-bench-" + std::to_string(::getpid());
  // Removed after the session's end, which writes the whole run's report there.
  struct RemovedLast {
    std::string dir;
    ~RemovedLast() { fathom::fs::remove_tree(dir); }
  } removed_last{report_dir};
  fathom::Session session(fathom::Options()
                              .mode(fathom::Mode::Auto)
                              .report_dir(report_dir)
                              .run_name("amp_bench")
                              .print_report(false));
  session.watch(*automatic.model);

  auto plain_step = [&] {
    const int b = plain.next++ % 16;
    plain.optimizer->zero_grad();
    F::cross_entropy(plain.model->forward(data.x[b]), data.y[b]).backward();
    plain.optimizer->step();
  };
  auto manual_step = [&] {
    const int b = manual.next++ % 16;
    torch::Tensor loss;
    {
      fathom::AutocastScope autocast(type, low);
      loss = F::cross_entropy(manual.model->forward(data.x[b]), data.y[b]);
    }
    manual.optimizer->zero_grad();
    scaler.scale(loss).backward();
    scaler.step(*manual.optimizer);
    scaler.update();
  };
  auto fathom_step = [&](fathom::EpochScope& e) {
    const int b = automatic.next++ % 16;
    auto step = e.step(batch);
    torch::Tensor loss;
    {
      auto f = step.forward();
      loss = F::cross_entropy(fathom::forward(automatic.model, data.x[b]), data.y[b]);
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
  };

  // Untimed: allocator and kernel warm-up for all, and Auto mode's decision (20 fp32 warm-up
  // steps, 30 watched) for fathom's.
  const fathom::AutoAmpOptions policy;
  {
    auto e = session.epoch();
    for (int i = 0; i < policy.warmup_steps + policy.watch_steps + 2; ++i) fathom_step(e);
  }
  for (int i = 0; i < 3; ++i) plain_step(), manual_step();
  sync(device);

  std::vector<Variant> variants;
  {
    auto e = session.epoch();  // open over the timed steps; its report is written after them
    variants.push_back({"fp32", plain_step, {}});
    variants.push_back({"hand-written amp", manual_step, {}});
    variants.push_back({"fathom auto amp", [&] { fathom_step(e); }, {}});
    for (int i = 0; i < args.steps; ++i) {
      for (auto& v : variants) {
        sync(device);
        const auto t0 = std::chrono::steady_clock::now();
        v.step();
        sync(device);
        v.step_s.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    }
  }

  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf(
      "amp_bench: example %s on %s (%s autocast%s), batch %d, %d timed steps each, interleaved\n",
      large ? "ResNet-18 64x64" : "ResNet-8 32x32", device.str().c_str(),
      std::string(fathom::short_dtype_name(low)).c_str(), fp16 ? " + GradScaler" : "", batch,
      args.steps);
  auto samples_per_s = [&](const Variant& v) { return batch / median(v.step_s); };
  const double base = samples_per_s(variants[0]);
  std::printf("  %-18s %12s %12s\n", "variant", "samples/s", "vs fp32");
  for (const auto& v : variants)
    std::printf("  %-18s %12.1f %11.2fx\n", v.name.c_str(), samples_per_s(v),
                samples_per_s(v) / base);
  const fathom::RunReport& report = session.report();
  if (!report.epochs.empty() && report.epochs.back().mixed_precision) {
    const fathom::MixedPrecisionSummary& m = *report.epochs.back().mixed_precision;
    std::printf("  fathom auto amp ended %s", m.state.c_str());
    for (const auto& epoch : report.epochs)
      for (const auto& ev : epoch.mixed_precision->events)
        std::printf("\n    step %lld %s: %s", static_cast<long long>(ev.step),
                    std::string(fathom::amp_event_kind_name(ev.kind)).c_str(), ev.detail.c_str());
    std::printf("\n");
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "amp_bench: %s\n", e.what());
  return 2;
}
