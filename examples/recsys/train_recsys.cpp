// Recommendation: a DLRM-style click model (embedding tables, a bottom and a top MLP, pairwise
// feature interactions) under fathom. Its batches are heavy on the host-to-device link: every step
// copies the dense features, the multi-hot indices of every table and the labels. Lines fathom
// needs are marked "fathom:".
//
//   train_recsys [--epochs N] [--steps N] [--batch N] [--device cpu|cuda] [--large] [--pinned]
//
// Default: 8 tables of 20k rows, 16 wide, 4 lookups each, batch 512 — seconds on a CPU.
// --large: 26 tables of 1M rows, 128 wide, 20 lookups each, batch 16384 (~70 MB copied a step).
// --pinned: page-locked batches copied with non_blocking=true (fathom's suggested fix for the
// pageable copies it reports by default).
#include <fathom/fathom.h>
#include <torch/torch.h>

#include <iostream>
#include <vector>

#include "example_args.h"
#include "progress.h"

namespace {

struct Config {
  std::int64_t tables, rows, width, lookups, dense = 13;
};

torch::nn::Sequential mlp(std::vector<std::int64_t> sizes, bool last_relu) {
  torch::nn::Sequential s;
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    s->push_back(torch::nn::Linear(sizes[i], sizes[i + 1]));
    if (i + 2 < sizes.size() || last_relu) s->push_back(torch::nn::ReLU());
  }
  return s;
}

struct DlrmImpl : torch::nn::Module {
  explicit DlrmImpl(const Config& c) : config(c) {
    bottom = register_module("bottom", mlp({c.dense, 64, c.width}, true));
    tables = register_module("tables", torch::nn::ModuleList());
    for (std::int64_t t = 0; t < c.tables; ++t)
      tables->push_back(torch::nn::EmbeddingBag(
          torch::nn::EmbeddingBagOptions(c.rows, c.width).mode(torch::kSum)));
    const std::int64_t features = c.tables + 1;
    top = register_module("top", mlp({c.width + features * (features - 1) / 2, 128, 64, 1}, false));
  }
  // dense: (batch, 13) floats; indices: (tables, batch, lookups) int64.
  torch::Tensor forward(const torch::Tensor& dense, const torch::Tensor& indices) {
    auto x = fathom::forward(bottom, dense);  // fathom: ranges per layer
    std::vector<torch::Tensor> features{x};
    {
      fathom::ModuleScope range(*tables);  // fathom: all lookups in one range
      for (std::int64_t t = 0; t < config.tables; ++t)
        features.push_back(tables[t]->as<torch::nn::EmbeddingBag>()->forward(indices[t]));
    }
    auto f = torch::stack(features, 1);            // (batch, features, width)
    auto dots = torch::bmm(f, f.transpose(1, 2));  // pairwise interactions
    auto iu =
        torch::triu_indices(f.size(1), f.size(1), 1, torch::TensorOptions().device(f.device()));
    auto pairs = dots.index({torch::indexing::Slice(), iu[0], iu[1]});
    return fathom::forward(top, torch::cat({x, pairs}, 1)).squeeze(1);
  }
  Config config;
  torch::nn::Sequential bottom{nullptr}, top{nullptr};
  torch::nn::ModuleList tables{nullptr};
};
TORCH_MODULE(Dlrm);

// Clicks depend on one dense feature and on whether the sample's first item of table 0 is a
// popular one (the lowest eighth of the rows), so both the MLP and the embeddings have something
// to learn.
struct Batch {
  torch::Tensor dense, indices, labels;
};
Batch make_batch(const Config& c, std::int64_t batch, bool pinned) {
  Batch b;
  b.dense = torch::randn({batch, c.dense});
  // Skewed ids, as real categorical features are: squaring a uniform draw favours low rows.
  b.indices = (torch::rand({c.tables, batch, c.lookups}).pow(2) * c.rows).to(torch::kLong);
  auto popular = (b.indices.select(0, 0).select(1, 0) < c.rows / 8).to(torch::kFloat) * 2 - 1;
  b.labels = ((2 * b.dense.select(1, 0) + 1.5 * popular) > 0).to(torch::kFloat);
  if (pinned) {
    b.dense = b.dense.pin_memory();
    b.indices = b.indices.pin_memory();
    b.labels = b.labels.pin_memory();
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) try {
  examples::Args defaults;
  defaults.steps = 30;
  const auto args = examples::parse_args(argc, argv, defaults, {"--pinned"});
  const Config config = args.large ? Config{26, 1'000'000, 128, 20} : Config{8, 20'000, 16, 4};
  const std::int64_t batch = args.batch ? args.batch : args.large ? 16384 : 512;
  torch::manual_seed(0);
  const torch::Device device = args.pick_device();
  const bool pinned = args.has("--pinned") && !device.is_cpu();  // pinning helps only a device copy

  Dlrm model(config);
  model->to(device);
  torch::optim::Adagrad optimizer(model->parameters(), torch::optim::AdagradOptions(0.05));
  const double mb_per_step =
      static_cast<double>(batch * (config.dense * 4 + config.tables * config.lookups * 8 + 4)) /
      1e6;
  std::cout << "recsys: " << config.tables << " tables x " << config.rows << " rows x "
            << config.width << ", batch " << batch << " (" << mb_per_step << " MB to copy a step, "
            << (pinned ? "pinned" : "pageable") << ") on " << device << "\n";

  fathom::Session session(
      fathom::Options().report_dir("reports").run_name("train_recsys"));  // fathom:
  session.watch(*model);                                                  // fathom:
  session.watch(optimizer);  // fathom: its state bytes, for the report's hardware fit

  for (int epoch = 0; epoch < args.epochs; ++epoch) {
    auto e = session.epoch();  // fathom:
    examples::Progress progress("samples", device, epoch, args.steps);
    for (int i = 0; i < args.steps; ++i) {
      Batch host = make_batch(config, batch, pinned);
      auto step = e.step(batch);  // fathom:
      // fathom: each copy is measured: bytes, time, and whether the host memory was pinned.
      auto dense = step.to_device(host.dense, device, pinned);
      auto indices = step.to_device(host.indices, device, pinned);
      auto labels = step.to_device(host.labels, device, pinned);
      torch::Tensor loss;
      {
        auto f = step.forward();  // fathom:
        loss = torch::binary_cross_entropy_with_logits(model->forward(dense, indices), labels);
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
      progress.update(i, batch, loss.detach());
    }
    progress.finish();
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "train_recsys: " << e.what() << "\n";
  return 2;
}
