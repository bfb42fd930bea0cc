// Language: a small GPT (decoder-only transformer) trained on synthetic token streams under
// fathom; throughput in tokens per second. Lines fathom needs are marked "fathom:".
//
//   train_gpt [--epochs N] [--steps N] [--batch N] [--device cpu|cuda] [--large]
//
// Default: 2 layers, 128 wide, 64-token context, vocabulary 512 — seconds on a CPU.
// --large: GPT-2 small (12 layers, 768 wide, 1024-token context, vocabulary 50304) — for a GPU.
#include <fathom/fathom.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "example_args.h"
#include "progress.h"

namespace {

struct Config {
  std::int64_t vocab, context, width, layers, heads;
};

// LibTorch modules have no forward hooks: each forward opens its own module range, named from
// session.watch() (e.g. "blocks.0.attention (CausalSelfAttention)").
struct CausalSelfAttentionImpl : torch::nn::Module {
  explicit CausalSelfAttentionImpl(const Config& c) : heads(c.heads) {
    qkv = register_module("qkv", torch::nn::Linear(c.width, 3 * c.width));
    proj = register_module("proj", torch::nn::Linear(c.width, c.width));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    fathom::ModuleScope range(*this);  // fathom:
    const auto b = x.size(0), t = x.size(1), c = x.size(2);
    auto parts = qkv(x).split(c, /*dim=*/2);
    auto heads_of = [&](const torch::Tensor& m) {
      return m.view({b, t, heads, c / heads}).transpose(1, 2);
    };
    auto y = at::scaled_dot_product_attention(heads_of(parts[0]), heads_of(parts[1]),
                                              heads_of(parts[2]), {},
                                              /*dropout_p=*/0.0, /*is_causal=*/true);
    return proj(y.transpose(1, 2).contiguous().view({b, t, c}));
  }
  std::int64_t heads;
  torch::nn::Linear qkv{nullptr}, proj{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const Config& c) {
    using namespace torch::nn;
    ln1 = register_module("ln1", LayerNorm(LayerNormOptions({c.width})));
    attention = register_module("attention", CausalSelfAttention(c));
    ln2 = register_module("ln2", LayerNorm(LayerNormOptions({c.width})));
    mlp = register_module(
        "mlp", Sequential(Linear(c.width, 4 * c.width), GELU(), Linear(4 * c.width, c.width)));
  }
  torch::Tensor forward(torch::Tensor x) {
    fathom::ModuleScope range(*this);  // fathom:
    x = x + attention(ln1(x));
    return x + fathom::forward(mlp, ln2(x));  // fathom: a range per MLP layer
  }
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  CausalSelfAttention attention{nullptr};
  torch::nn::Sequential mlp{nullptr};
};
TORCH_MODULE(Block);

struct GptImpl : torch::nn::Module {
  explicit GptImpl(const Config& c) {
    using namespace torch::nn;
    tokens = register_module("tokens", Embedding(c.vocab, c.width));
    positions = register_module("positions", Embedding(c.context, c.width));
    blocks = register_module("blocks", ModuleList());
    for (int i = 0; i < c.layers; ++i) blocks->push_back(Block(c));
    ln_f = register_module("ln_f", LayerNorm(LayerNormOptions({c.width})));
    head = register_module("head", Linear(LinearOptions(c.width, c.vocab).bias(false)));
  }
  torch::Tensor forward(const torch::Tensor& idx) {
    auto pos = torch::arange(idx.size(1), idx.options());
    auto x = tokens(idx) + positions(pos);
    for (const auto& block : *blocks) x = block->as<Block>()->forward(x);
    fathom::ModuleScope range(*head);  // fathom: the largest matmul on its own
    return head(ln_f(x));
  }
  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Gpt);

// Token streams from a fixed random successor table with 10% noise: predictable enough that the
// loss falls well below log(vocab), random enough that it does not reach zero. Made on the host,
// as a tokenizing loader would.
class SyntheticText {
 public:
  explicit SyntheticText(std::int64_t vocab) : vocab_(vocab) {
    torch::manual_seed(1);
    successor_ = torch::randperm(vocab);
  }
  // (batch, context + 1) tokens: inputs are [:, :-1], targets [:, 1:].
  torch::Tensor batch(std::int64_t batch, std::int64_t context) {
    auto out = torch::empty({batch, context + 1}, torch::kLong);
    auto col = torch::randint(vocab_, {batch}, torch::kLong);
    out.select(1, 0).copy_(col);
    for (std::int64_t t = 1; t <= context; ++t) {
      auto next = successor_.index_select(0, col);
      auto noise = torch::rand({batch}) < 0.1;
      col = torch::where(noise, torch::randint(vocab_, {batch}, torch::kLong), next);
      out.select(1, t).copy_(col);
    }
    return out;
  }

 private:
  std::int64_t vocab_;
  torch::Tensor successor_;
};

}  // namespace

int main(int argc, char** argv) try {
  examples::Args defaults;
  defaults.steps = 30;
  const auto args = examples::parse_args(argc, argv, defaults);
  const Config config = args.large ? Config{50304, 1024, 768, 12, 12} : Config{512, 64, 128, 2, 4};
  const std::int64_t batch = args.batch ? args.batch : args.large ? 8 : 16;
  torch::manual_seed(0);
  const torch::Device device = args.pick_device();

  Gpt model(config);
  model->to(device);
  torch::optim::AdamW optimizer(model->parameters(),
                                torch::optim::AdamWOptions(args.large ? 6e-4 : 3e-3));
  SyntheticText text(config.vocab);
  std::cout << "gpt: " << config.layers << " layers, width " << config.width << ", context "
            << config.context << ", vocabulary " << config.vocab << ", batch " << batch << " on "
            << device
            << " (loss starts near log(vocab) = " << std::log(static_cast<double>(config.vocab))
            << ")\n";

  fathom::Session session(
      fathom::Options().report_dir("reports").run_name("train_gpt"));  // fathom:
  session.watch(*model);                                               // fathom:
  session.watch(optimizer);  // fathom: its state bytes, for the report's hardware fit

  for (int epoch = 0; epoch < args.epochs; ++epoch) {
    auto e = session.epoch();  // fathom:
    examples::Progress progress("tok", device, epoch, args.steps);
    for (int i = 0; i < args.steps; ++i) {
      auto tokens = text.batch(batch, config.context);
      auto step =
          e.step(batch * config.context);  // fathom: samples = tokens, so throughput is tokens/s
      auto on_device = step.to_device(tokens, device);
      auto input = on_device.narrow(1, 0, config.context);
      auto target = on_device.narrow(1, 1, config.context);
      torch::Tensor loss;
      {
        auto f = step.forward();  // fathom:
        auto logits = model->forward(input);
        loss = torch::nn::functional::cross_entropy(logits.view({-1, config.vocab}),
                                                    target.reshape({-1}));
      }
      {
        auto b = step.backward();  // fathom:
        optimizer.zero_grad();
        step.scaled(loss).backward();  // fathom: the loss, scaled when fp16 mixed precision runs
      }
      {
        auto o = step.optimizer();  // fathom:
        step.unscale(optimizer);    // fathom: true gradients before clipping (no-op in fp32)
        torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
        step.apply(optimizer);  // fathom: optimizer.step(), skipped on inf/NaN gradients
      }
      progress.update(i, batch * config.context, loss.detach());
    }
    progress.finish();
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "train_gpt: " << e.what() << "\n";
  return 2;
}
