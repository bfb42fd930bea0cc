// The loop kinds of issue 24 (a linear regression, an MNIST CNN, a GAN with two optimizers, an LSTM
// language model, a CIFAR ResNet, a small decoder-only transformer), each written the way the
// README shows, small enough to run in seconds. One loop per run, in the mode FATHOM_MODE says
// (the session reads it), so that bench/auto_loops.py can compare the total CPU time of a whole
// run under FATHOM_MODE=auto with the same run under FATHOM_MODE=off: what Auto's trials cost.
//
//   auto_loops_bench LOOP [STEPS]     LOOP: linreg, mnist, gan, lstm, resnet, transformer
//
// One intra-op thread: CPU time then measures work, not threads spinning for work.
#include <fathom/fathom.h>
#include <torch/torch.h>

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "resnet.h"  // the vision example's model

namespace {

namespace F = torch::nn::functional;

// The session every loop runs in: its report in a scratch folder, no terminal report.
fathom::Session make_session(const std::string& loop) {
  return fathom::Session(fathom::Options()
                             .report_dir("/tmp/fathom-auto-loops/" + loop)
                             .run_name(loop)
                             .print_report(false));
}

// One README step: forward under fathom::forward, the loss told, the optimizer stepped by fathom.
template <typename Forward>
double train_step(fathom::EpochScope& e, std::int64_t batch, torch::optim::Optimizer& opt,
                  Forward&& forward) {
  auto step = e.step(batch);
  torch::Tensor loss;
  {
    auto f = step.forward();
    loss = forward();
  }
  {
    auto b = step.backward();
    opt.zero_grad();
    step.scaled(loss).backward();
  }
  {
    auto o = step.optimizer();
    step.apply(opt);
  }
  return loss.item<double>();
}

double linreg(int steps) {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.05));
  fathom::Session session = make_session("linreg");
  session.watch(*model);
  const auto w = torch::tensor({{1.5}, {-2.0}, {0.5}, {3.0}});
  double loss = 0;
  auto e = session.epoch();
  for (int s = 0; s < steps; ++s) {
    auto x = torch::randn({64, 4});
    auto y = x.matmul(w) + 0.1 * torch::randn({64, 1});
    loss = train_step(e, 64, opt,
                      [&] { return F::mse_loss(fathom::forward(model, x).to(torch::kFloat), y); });
  }
  return loss;
}

double mnist(int steps) {
  using namespace torch::nn;
  Sequential model(Conv2d(Conv2dOptions(1, 8, 5)), ReLU(), MaxPool2d(2),
                   Conv2d(Conv2dOptions(8, 16, 5)), ReLU(), MaxPool2d(2), Flatten(),
                   Linear(256, 64), ReLU(), Linear(64, 10));
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  fathom::Session session = make_session("mnist");
  session.watch(*model);
  const auto images = torch::randn({512, 1, 28, 28});
  const auto labels = torch::randint(0, 10, {512}, torch::kLong);
  double loss = 0;
  auto e = session.epoch();
  for (int s = 0; s < steps; ++s) {
    const auto i = (s * 32) % 512;
    auto x = images.narrow(0, i, 32), y = labels.narrow(0, i, 32);
    loss = train_step(e, 32, opt, [&] {
      return F::cross_entropy(fathom::forward(model, x).to(torch::kFloat), y);
    });
  }
  return loss;
}

// The DCGAN pattern: the discriminator's step, then the generator's, in one fathom step; the
// generator's loss is told last, so Auto watches it.
double gan(int steps) {
  using namespace torch::nn;
  Sequential g(Linear(16, 64), ReLU(), Linear(64, 64), Tanh());
  Sequential d(Linear(64, 64), LeakyReLU(LeakyReLUOptions().negative_slope(0.2)), Linear(64, 1));
  torch::optim::Adam opt_g(g->parameters(), torch::optim::AdamOptions(2e-4));
  torch::optim::Adam opt_d(d->parameters(), torch::optim::AdamOptions(2e-4));
  fathom::Session session = make_session("gan");
  session.watch(*g);
  session.watch(*d);
  session.watch(opt_g);
  session.watch(opt_d);
  const auto real_data = torch::tanh(torch::randn({512, 64}));
  double last = 0;
  auto e = session.epoch();
  for (int s = 0; s < steps; ++s) {
    auto real = real_data.narrow(0, (s * 32) % 512, 32);
    auto step = e.step(32);
    torch::Tensor loss_d, loss_g, fake;
    {
      auto f = step.forward();
      fake = fathom::forward(g, torch::randn({32, 16}));
      auto out_real = fathom::forward(d, real).to(torch::kFloat);
      auto out_fake = fathom::forward(d, fake.detach()).to(torch::kFloat);
      loss_d = F::binary_cross_entropy_with_logits(out_real, torch::ones_like(out_real)) +
               F::binary_cross_entropy_with_logits(out_fake, torch::zeros_like(out_fake));
    }
    {
      auto b = step.backward();
      opt_d.zero_grad();
      step.scaled(loss_d).backward();
    }
    {
      auto o = step.optimizer();
      step.apply(opt_d);
    }
    {
      auto f = step.forward();  // through the updated discriminator
      auto out_g = fathom::forward(d, fake).to(torch::kFloat);
      loss_g = F::binary_cross_entropy_with_logits(out_g, torch::ones_like(out_g));
    }
    {
      auto b = step.backward();
      opt_g.zero_grad();
      step.scaled(loss_g).backward();
    }
    {
      auto o = step.optimizer();
      step.apply(opt_g);
    }
    last = loss_g.item<double>();
  }
  return last;
}

struct LmImpl : torch::nn::Module {
  torch::nn::Embedding embed{nullptr};
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Linear head{nullptr};
  LmImpl() {
    embed = register_module("embed", torch::nn::Embedding(64, 32));
    lstm =
        register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(32, 64).batch_first(true)));
    head = register_module("head", torch::nn::Linear(64, 64));
  }
  std::tuple<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>> forward(
      const torch::Tensor& tokens, const std::tuple<torch::Tensor, torch::Tensor>& state) {
    auto [out, next] = lstm->forward(embed->forward(tokens), state);
    return {head->forward(out), next};
  }
};
TORCH_MODULE(Lm);

// The word-language-model pattern: the state is carried, detached, from each batch to the next.
double lstm(int steps) {
  Lm model;
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(1.0));
  fathom::Session session = make_session("lstm");
  session.watch(*model);
  std::tuple<torch::Tensor, torch::Tensor> state{torch::zeros({1, 8, 64}),
                                                 torch::zeros({1, 8, 64})};
  double loss = 0;
  auto e = session.epoch();
  for (int s = 0; s < steps; ++s) {
    auto tokens = (torch::randint(0, 64, {8, 1}, torch::kLong) + torch::arange(17)).remainder(64);
    loss = train_step(e, 8, opt, [&] {
      auto [logits, next] = fathom::forward(model, tokens.narrow(1, 0, 16), state);
      state = {std::get<0>(next).detach(), std::get<1>(next).detach()};
      return F::cross_entropy(logits.reshape({-1, 64}).to(torch::kFloat),
                              tokens.narrow(1, 1, 16).reshape({-1}));
    });
  }
  return loss;
}

double resnet(int steps) {
  auto model = examples::make_resnet(8, {1, 1, 1});  // ResNet-8, narrow
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  fathom::Session session = make_session("resnet");
  session.watch(*model);
  const auto images = torch::randn({256, 3, 32, 32});
  const auto labels = torch::randint(0, 10, {256}, torch::kLong);
  double loss = 0;
  auto e = session.epoch();
  for (int s = 0; s < steps; ++s) {
    const auto i = (s * 16) % 256;
    auto x = images.narrow(0, i, 16), y = labels.narrow(0, i, 16);
    loss = train_step(e, 16, opt, [&] {
      return F::cross_entropy(fathom::forward(model, x).to(torch::kFloat), y);
    });
  }
  return loss;
}

// A decoder-only transformer: token and position embeddings, two causal self-attention layers.
struct GptImpl : torch::nn::Module {
  torch::nn::Embedding tok{nullptr}, pos{nullptr};
  torch::nn::TransformerEncoder layers{nullptr};
  torch::nn::Linear head{nullptr};
  GptImpl() {
    tok = register_module("tok", torch::nn::Embedding(128, 64));
    pos = register_module("pos", torch::nn::Embedding(32, 64));
    layers = register_module(
        "layers",
        torch::nn::TransformerEncoder(torch::nn::TransformerEncoderOptions(
            torch::nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(128).dropout(0.0),
            2)));
    head = register_module("head", torch::nn::Linear(64, 128));
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    const auto t = tokens.size(1);
    auto x = tok(tokens) + pos(torch::arange(t, torch::kLong)).unsqueeze(0);
    auto mask = torch::triu(torch::full({t, t}, -1e9), 1);
    x = layers->forward(x.transpose(0, 1), mask).transpose(0, 1);
    return head(x);
  }
};
TORCH_MODULE(Gpt);

double transformer(int steps) {
  Gpt model;
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3));
  fathom::Session session = make_session("transformer");
  session.watch(*model);
  double loss = 0;
  auto e = session.epoch();
  for (int s = 0; s < steps; ++s) {
    auto tokens = (torch::randint(0, 128, {8, 1}, torch::kLong) + torch::arange(33)).remainder(128);
    loss = train_step(e, 8, opt, [&] {
      auto logits = fathom::forward(model, tokens.narrow(1, 0, 32));
      return F::cross_entropy(logits.reshape({-1, 128}).to(torch::kFloat),
                              tokens.narrow(1, 1, 32).reshape({-1}));
    });
  }
  return loss;
}

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, std::pair<std::function<double(int)>, int>> loops{
      {"linreg", {linreg, 1500}}, {"mnist", {mnist, 300}},   {"gan", {gan, 800}},
      {"lstm", {lstm, 400}},      {"resnet", {resnet, 150}}, {"transformer", {transformer, 300}}};
  const auto it = argc > 1 ? loops.find(argv[1]) : loops.end();
  if (it == loops.end()) {
    std::fprintf(stderr,
                 "usage: auto_loops_bench LOOP [STEPS]; LOOP: linreg, mnist, gan, lstm, "
                 "resnet, transformer\n");
    return 2;
  }
  torch::set_num_threads(1);
  torch::manual_seed(0);
  const int steps = argc > 2 ? std::stoi(argv[2]) : it->second.second;
  const double loss = it->second.first(steps);
  std::printf("%s: %d steps, last loss %.4f\n", it->first.c_str(), steps, loss);
  return 0;
}
