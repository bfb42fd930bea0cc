// Data-parallel training on c10d, the way DistributedDataParallel does it, in C++: every rank
// holds the whole model, trains on its own shard, and averages gradients with all-reduce in
// buckets launched during backward (a bucket goes as soon as its gradients are ready, so the
// communication overlaps the rest of backward). fathom's lines are marked "fathom:".
//
// Launch every rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (run.sh does; so does
// torchrun). Flags:
//   --epochs N --steps N --batch N    the loop's size
//   --backend auto|gloo|nccl          auto: NCCL when this rank has a GPU and the build has NCCL
//   --bucket-kb N                     gradient bucket size (default 256)
//   --slow-rank R --slow-ms M         rank R computes M ms longer per step (a straggler)
//   --slow-data-rank R --slow-data-ms M   rank R waits M ms longer for each batch
//   --kill-rank R --kill-at E:S       rank R dies (SIGKILL) at the start of epoch E's step S
//   --merge-timeout-s T               how long rank 0 waits for the others' summaries
#include <fathom/distributed.h>
#include <fathom/fathom.h>
#include <torch/torch.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "process_group.h"

namespace {

struct Flags {
  int epochs = 2, steps = 20, batch = 32, bucket_kb = 256;
  std::string backend = "auto";
  int slow_rank = -1, slow_ms = 0, slow_data_rank = -1, slow_data_ms = 0;
  int kill_rank = -1, kill_epoch = -1, kill_step = -1;
  double merge_timeout_s = 60;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc)
      throw std::invalid_argument(k + " needs a value (see the top of train_ddp.cpp)");
    const std::string v = argv[++i];
    if (k == "--epochs")
      f.epochs = std::stoi(v);
    else if (k == "--steps")
      f.steps = std::stoi(v);
    else if (k == "--batch")
      f.batch = std::stoi(v);
    else if (k == "--bucket-kb")
      f.bucket_kb = std::stoi(v);
    else if (k == "--backend")
      f.backend = v;
    else if (k == "--slow-rank")
      f.slow_rank = std::stoi(v);
    else if (k == "--slow-ms")
      f.slow_ms = std::stoi(v);
    else if (k == "--slow-data-rank")
      f.slow_data_rank = std::stoi(v);
    else if (k == "--slow-data-ms")
      f.slow_data_ms = std::stoi(v);
    else if (k == "--kill-rank")
      f.kill_rank = std::stoi(v);
    else if (k == "--kill-at") {
      const auto colon = v.find(':');
      if (colon == std::string::npos)
        throw std::invalid_argument("--kill-at " + v + ": give EPOCH:STEP");
      f.kill_epoch = std::stoi(v.substr(0, colon));
      f.kill_step = std::stoi(v.substr(colon + 1));
    } else if (k == "--merge-timeout-s")
      f.merge_timeout_s = std::stod(v);
    else
      throw std::invalid_argument("unknown flag " + k + " (see the top of train_ddp.cpp)");
  }
  if (f.epochs < 1 || f.steps < 1 || f.batch < 1 || f.bucket_kb < 1)
    throw std::invalid_argument("--epochs, --steps, --batch and --bucket-kb must be above 0");
  return f;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::stoi(v) : fallback;
}

// Gradients averaged over the ranks in buckets. Parameters are bucketed in reverse order, the
// order backward produces their gradients; a gradient hook counts a bucket's parameters in, and
// the full bucket's all-reduce starts at once, while backward goes on with earlier layers.
class BucketedAllReduce {
 public:
  BucketedAllReduce(std::vector<torch::Tensor> params, c10::intrusive_ptr<c10d::ProcessGroup> group,
                    fathom::Session& session, std::int64_t bucket_bytes)
      : params_(std::move(params)), group_(std::move(group)), session_(session) {
    std::vector<int> current;
    std::int64_t bytes = 0;
    for (int i = static_cast<int>(params_.size()) - 1; i >= 0; --i) {
      current.push_back(i);
      bytes += static_cast<std::int64_t>(params_[static_cast<std::size_t>(i)].nbytes());
      if (bytes >= bucket_bytes || i == 0) {
        buckets_.push_back({current, {}, {}, 0});
        current.clear();
        bytes = 0;
      }
    }
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      for (int i : buckets_[b].params) {
        hooks_.push_back(params_[static_cast<std::size_t>(i)].register_hook(
            [this, b, i](torch::Tensor grad) { ready(b, i, grad); }));
      }
  }

  // After backward: waits for every bucket (fathom times the wait) and writes the averages.
  void finish() {
    const double world = group_->getSize();
    for (Bucket& b : buckets_) {
      if (!b.work)
        throw std::runtime_error(
            "a gradient bucket was never launched (a parameter got no gradient)");
      fathom::wait_collective(session_, *b.work);  // fathom:
      std::int64_t at = 0;
      for (int i : b.params) {
        auto& p = params_[static_cast<std::size_t>(i)];
        const std::int64_t n = p.numel();
        p.mutable_grad().copy_(b.flat.slice(0, at, at + n).view_as(p).div_(world));
        at += n;
      }
      b.work.reset();
      b.grads.clear();
      b.arrived = 0;
    }
  }

 private:
  struct Bucket {
    std::vector<int> params;
    std::vector<torch::Tensor> grads;
    torch::Tensor flat;
    std::size_t arrived = 0;
    c10::intrusive_ptr<c10d::Work> work;
  };

  void ready(std::size_t b, int i, const torch::Tensor& grad) {
    Bucket& bucket = buckets_[b];
    if (bucket.grads.empty()) bucket.grads.resize(bucket.params.size());
    for (std::size_t k = 0; k < bucket.params.size(); ++k)
      if (bucket.params[k] == i) bucket.grads[k] = grad.detach().reshape({-1});
    if (++bucket.arrived < bucket.params.size()) return;
    bucket.flat = torch::cat(bucket.grads);
    std::vector<at::Tensor> tensors{bucket.flat};
    const auto bytes = static_cast<std::int64_t>(bucket.flat.nbytes());
    bucket.work = fathom::track_collective(session_, group_->allreduce(tensors), bytes);  // fathom:
  }

  std::vector<torch::Tensor> params_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  fathom::Session& session_;
  std::vector<Bucket> buckets_;
  std::vector<unsigned> hooks_;
};

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse(argc, argv);
  const int rank = env_int("RANK", 0);
  const int world = env_int("WORLD_SIZE", 1);
  const int local_rank = env_int("LOCAL_RANK", rank);
  const char* addr = std::getenv("MASTER_ADDR");
  const int port = env_int("MASTER_PORT", 29500);
  const auto timeout = std::chrono::seconds(60);

  std::string backend = flags.backend;
  if (backend == "auto")
    backend = examples::nccl_built() && torch::cuda::is_available() ? "nccl" : "gloo";
  const torch::Device device =
      backend == "nccl" ? torch::Device(torch::kCUDA, local_rank) : torch::Device(torch::kCPU);

  auto store = examples::make_store(addr ? addr : "127.0.0.1", port, rank, world, timeout);
  auto group = examples::make_process_group(backend, store, rank, world, timeout);

  fathom::Session session(
      fathom::Options().report_dir("reports").run_name("train_ddp"));  // fathom:
  fathom::use_process_group(
      session, group,                              // fathom:
      fathom::DistributedOptions().merge_timeout(  // fathom:
          std::chrono::milliseconds(static_cast<long>(flags.merge_timeout_s * 1000))));

  // Every rank starts from the same weights (the same seed), then trains on its own data.
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(128, 512), torch::nn::ReLU(),
                              torch::nn::Linear(512, 512), torch::nn::ReLU(),
                              torch::nn::Linear(512, 10));
  model->to(device);
  session.watch(*model);  // fathom:
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
  BucketedAllReduce reducer(model->parameters(), group, session,
                            static_cast<std::int64_t>(flags.bucket_kb) * 1024);
  torch::manual_seed(1000 + rank);

  std::cout << "rank " << rank << " of " << world << ": " << backend << " on " << device << "\n";
  try {
    for (int epoch = 0; epoch < flags.epochs; ++epoch) {
      auto e = session.epoch();  // fathom:
      double loss_sum = 0;
      for (int s = 0; s < flags.steps; ++s) {
        if (rank == flags.kill_rank && epoch == flags.kill_epoch && s == flags.kill_step) {
          std::cerr << "rank " << rank << ": killed at epoch " << epoch << " step " << s
                    << " (--kill-rank)\n";
          std::raise(SIGKILL);
        }
        auto step = e.step(flags.batch);  // fathom:
        torch::Tensor x, y;
        {
          auto d = step.data();  // fathom:
          x = torch::randn({flags.batch, 128});
          y = x.slice(1, 0, 10).argmax(1);  // a learnable label
          if (rank == flags.slow_data_rank)
            std::this_thread::sleep_for(std::chrono::milliseconds(flags.slow_data_ms));
        }
        x = step.to_device(x, device);  // fathom:
        y = step.to_device(y, device);  // fathom:
        torch::Tensor loss;
        {
          auto f = step.forward();  // fathom:
          loss = torch::nn::functional::cross_entropy(model->forward(x), y);
          if (rank == flags.slow_rank)
            std::this_thread::sleep_for(std::chrono::milliseconds(flags.slow_ms));
        }
        {
          auto b = step.backward();  // fathom:
          optimizer.zero_grad();
          loss.backward();
          reducer.finish();
        }
        {
          auto o = step.optimizer();  // fathom:
          optimizer.step();
        }
        loss_sum += loss.item<double>();
      }
      std::cout << "rank " << rank << " epoch " << epoch << " loss " << loss_sum / flags.steps
                << "\n";
    }
  } catch (const std::exception& ex) {
    // A dead peer breaks the collectives; the epoch scope above has already ended (and rank 0
    // has written the job report naming the missing rank) by the time we get here.
    std::cerr << "rank " << rank << ": training stopped: " << ex.what() << "\n";
    return 1;
  }
  return 0;
}
