// Activation checkpointing on the example models: for each, the activation memory and the
// recompute with no checkpointing, with sqrt(n) equal segments (checkpoint_sequential), and with
// fathom's plan at 50 % and 33 % of the unconstrained activation peak. Then how long the planner
// takes for a chain of 200 blocks. Offload rows follow each model's table (bench_offload).
//
//   checkpoint_bench [--repeats N]
//
// Columns: "peak" is the model's predicted activation peak (checkpoint_planner.h); "kept" is what
// the forward keeps for backward, predicted and measured (saved-tensor hooks, deduplicated by
// storage); "recompute" is the forward time recomputed in backward, as a share of the chain's
// forward (predicted from per-block forward times); "step" is the measured forward+backward time
// and its overhead over no checkpointing. CPU runs are short: read ratios, not absolute times.
#include <fathom/fathom.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "measure/saved_tensor_meter.h"
#include "resnet.h"

namespace {

// A transformer-like chain: pre-norm MLP blocks with a residual, as in a GPT's feed-forward half.
struct MlpBlockImpl : torch::nn::Module {
  explicit MlpBlockImpl(std::int64_t width)
      : norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
        up(register_module("up", torch::nn::Linear(width, 4 * width))),
        down(register_module("down", torch::nn::Linear(4 * width, width))) {}
  at::Tensor forward(const at::Tensor& x) {
    return x + down->forward(torch::gelu(up->forward(norm->forward(x))));
  }
  torch::nn::LayerNorm norm;
  torch::nn::Linear up, down;
};
TORCH_MODULE(MlpBlock);

torch::nn::Sequential mlp_chain(std::int64_t width, int blocks) {
  torch::nn::Sequential seq;
  for (int i = 0; i < blocks; ++i) seq->push_back(MlpBlock(width));
  seq->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  seq->push_back(torch::nn::Linear(width, 256));
  return seq;
}

struct Model {
  std::string name;
  torch::nn::Sequential seq;
  std::function<at::Tensor()> batch;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::vector<fathom::ChainBlock> measure(Model& m) {
  fathom::Session session(fathom::Options()
                              .mode(fathom::Mode::Observe)
                              .print_report(false)
                              .report_dir("/tmp/fathom-checkpoint-bench")
                              .run_name(m.name));
  session.watch(*m.seq);
  {
    auto e = session.epoch();
    for (int s = 0; s < 3; ++s) {
      auto step = e.step();
      at::Tensor loss;
      {
        auto f = step.forward();
        loss = fathom::forward(m.seq, m.batch()).pow(2).mean();
      }
      {
        auto b = step.backward();
        m.seq->zero_grad();
        loss.backward();
      }
    }
  }
  std::vector<fathom::ChainBlock> chain;
  for (const fathom::ModuleMeasurement& x : session.report().epochs.at(0).modules->modules)
    chain.push_back(fathom::chain_block(x));
  return chain;
}

struct Measured {
  std::int64_t kept = 0;
  double step_ms = 0;
};

Measured run(Model& m, const std::vector<fathom::CheckpointSegment>& segments, int repeats) {
  Measured r;
  std::vector<double> times;
  for (int i = 0; i < repeats + 1; ++i) {
    const at::Tensor x = m.batch();
    m.seq->zero_grad();
    const auto t = std::chrono::steady_clock::now();
    at::Tensor y;
    {
      fathom::detail::SavedTensorCapture capture;  // the chain only: the loss saves its input too
      y = fathom::forward(m.seq, x, segments);
      r.kept = capture.total_bytes();
    }
    y.pow(2).mean().backward();
    if (i > 0) times.push_back(seconds_since(t) * 1e3);  // the first run warms up
  }
  std::sort(times.begin(), times.end());
  r.step_ms = times[times.size() / 2];
  return r;
}

std::string mib(std::int64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(b) / 1048576.0);
  return s;
}

void bench_model(Model& m, int repeats) {
  const std::vector<fathom::ChainBlock> chain = measure(m);
  const fathom::FusedChain fused = fuse_aliasing_blocks(chain);
  const fathom::PlanCost none = fathom::evaluate_plan(fused.blocks, {});
  double forward_ms = 0;
  for (const auto& b : fused.blocks) forward_ms += b.forward_ms;
  std::printf(
      "\n%s: %zu modules, %zu blocks after merging views and in-place modules, forward %.2f ms\n",
      m.name.c_str(), chain.size(), fused.blocks.size(), forward_ms);
  std::printf("  %-16s %4s %12s %7s %12s %12s %10s %10s %9s\n", "strategy", "segs", "peak",
              "of none", "kept pred.", "kept meas.", "recompute", "step ms", "overhead");
  struct Row {
    std::string name;
    std::vector<fathom::CheckpointSegment> segments;  // fused indices
  };
  std::vector<double> infeasible;
  std::vector<Row> rows{
      {"none", {}},
      {"sqrt(n) segments", fathom::sqrt_segments(static_cast<int>(fused.blocks.size()))}};
  for (double share : {0.5, 0.33}) {
    const auto budget = static_cast<std::int64_t>(share * static_cast<double>(none.peak_bytes));
    fathom::CheckpointPlan plan = fathom::plan_checkpoints(fused.blocks, budget);
    char name[48];
    std::snprintf(name, sizeof name, "fathom @ %.0f%%", share * 100);
    if (!plan.feasible) {
      // Single-level checkpointing cannot go below about 2 sqrt(n) activations: show the least.
      std::snprintf(name, sizeof name, "fathom @ %.0f%%*",
                    100.0 * plan.min_feasible_budget_bytes / none.peak_bytes);
      plan = fathom::plan_checkpoints(fused.blocks, plan.min_feasible_budget_bytes);
      infeasible.push_back(share);
    }
    rows.push_back({name, plan.segments});
  }
  double none_ms = 0;
  for (const Row& row : rows) {
    const fathom::PlanCost cost = fathom::evaluate_plan(fused.blocks, row.segments);
    const Measured got = run(m, fathom::unfuse_segments(fused, row.segments), repeats);
    if (row.segments.empty()) none_ms = got.step_ms;
    std::printf("  %-16s %4zu %12s %6.0f%% %12s %12s %9.0f%% %10.2f %8.0f%%\n", row.name.c_str(),
                row.segments.size(), mib(cost.peak_bytes).c_str(),
                100.0 * cost.peak_bytes / none.peak_bytes, mib(cost.stored_bytes).c_str(),
                mib(got.kept).c_str(),
                forward_ms > 0 ? 100.0 * cost.recompute_ms / forward_ms : 0.0, got.step_ms,
                none_ms > 0 ? 100.0 * (got.step_ms / none_ms - 1.0) : 0.0);
  }
  for (const Row& row : rows) {
    if (row.segments.empty()) continue;
    std::printf("  %-16s checkpoints", row.name.c_str());
    for (const auto& seg : fathom::unfuse_segments(fused, row.segments))
      std::printf(" [%d, %d)", seg.begin, seg.end);
    std::printf(" of the Sequential's items\n");
  }
  for (double share : infeasible)
    std::printf(
        "  * %.0f%% is below what any single-level plan needs: the row is fathom's least-memory "
        "plan\n",
        share * 100);
}

void bench_planner() {
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::int64_t> own(0, 64 << 20), io(1 << 20, 32 << 20);
  std::uniform_real_distribution<double> ms(0.1, 5.0);
  std::bernoulli_distribution keep(0.5);
  std::vector<fathom::ChainBlock> chain(200);
  std::int64_t input = io(rng);
  for (auto& b : chain) {
    b.own_bytes = own(rng);
    b.input_bytes = input;
    b.output_bytes = io(rng);
    b.input_saved_bytes = keep(rng) ? b.input_bytes : 0;
    b.output_saved_bytes = keep(rng) ? b.output_bytes : 0;
    b.forward_ms = ms(rng);
    input = b.output_bytes;
  }
  const std::int64_t peak = fathom::evaluate_plan(chain, {}).peak_bytes;
  std::printf(
      "\nplanner, 200 blocks of random sizes and times (worst case: every size and time "
      "distinct)\n");
  for (double share : {0.8, 0.5, 0.33, 0.2}) {
    const auto t = std::chrono::steady_clock::now();
    const auto c = std::clock();
    const fathom::CheckpointPlan plan =
        fathom::plan_checkpoints(chain, static_cast<std::int64_t>(share * peak));
    std::printf("  budget %3.0f%%: %.3f s wall, %.3f s CPU, %zu segments, exact %s\n", share * 100,
                seconds_since(t), static_cast<double>(std::clock() - c) / CLOCKS_PER_SEC,
                plan.segments.size(), plan.exact ? "yes" : "no");
  }
}

// --- offload rows (issue 26 item 2), apart from the checkpoint rows above ------------------------

// The saved storages of a forward that are still allocated when it returns: what stays on the
// device for backward. An observer on fathom's saved-tensor hook (saved_tensor_meter.h) holding
// each storage weakly, so an offloaded one, freed after its copy, no longer counts.
class ResidentSaved final : public fathom::detail::SavedTensorPacker {
 public:
  void observe(const at::Tensor& t, bool parameter) noexcept override {
    if (parameter || !t.has_storage()) return;
    const void* key = t.storage().unsafeGetStorageImpl();
    if (seen_.insert(key).second) storages_.push_back(t.storage().getWeakStorageImpl());
  }
  std::int64_t resident_bytes() const {
    std::int64_t bytes = 0;
    for (const auto& w : storages_)
      if (auto s = w.lock()) bytes += static_cast<std::int64_t>(s->nbytes());
    return bytes;
  }

 private:
  std::unordered_set<const void*> seen_;
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> storages_;
};

struct OffloadRun {
  std::int64_t resident = 0;
  fathom::OffloadSummary summary;
  double step_ms = 0;
  std::vector<at::Tensor> grads;
};

// Every item of the Sequential as one unit under fathom::offload (the CPU copy path here: the
// "host copy" a separate buffer, so what leaves the device is measured as on a GPU), or plain.
OffloadRun run_offload(Model& m, const at::Tensor& x, bool offloaded, int repeats) {
  OffloadRun r;
  std::vector<double> times;
  for (int i = 0; i < repeats + 1; ++i) {
    m.seq->zero_grad();
    fathom::OffloadMeter meter;
    const auto options = fathom::OffloadOptions().cpu_copy(true).min_bytes(0).meter(meter);
    const auto t = std::chrono::steady_clock::now();
    at::Tensor h = x;
    std::int64_t resident = 0;
    {
      ResidentSaved saved;  // the chain only: the loss saves its input too
      for (torch::nn::AnyModule& item : *m.seq)
        h = offloaded ? fathom::offload([&item](const at::Tensor& in) { return item.forward(in); },
                                        h, options)
                      : item.forward(h);
      resident = saved.resident_bytes();
    }
    h.pow(2).mean().backward();
    if (i > 0) times.push_back(seconds_since(t) * 1e3);
    r.resident = resident;
    r.summary = meter.summary();
  }
  std::sort(times.begin(), times.end());
  r.step_ms = times[times.size() / 2];
  for (const auto& p : m.seq->parameters()) r.grads.push_back(p.grad().clone());
  return r;
}

void bench_offload(Model& m, int repeats) {
  const at::Tensor x = m.batch();
  const OffloadRun none = run_offload(m, x, false, repeats);
  const OffloadRun off = run_offload(m, x, true, repeats);
  bool identical = none.grads.size() == off.grads.size();
  for (std::size_t i = 0; identical && i < none.grads.size(); ++i)
    identical = torch::equal(none.grads[i], off.grads[i]);
  std::printf("  offload rows (each Sequential item under fathom::offload, the CPU copy path):\n");
  std::printf("  %-16s %12s %13s %12s %10s %10s %9s %s\n", "strategy", "resident", "peak_fraction",
              "offloaded", "recompute", "step ms", "overhead", "gradients_identical");
  for (const auto* row : {&none, &off}) {
    const bool is_none = row == &none;
    std::printf("  %-16s %12s %12.0f%% %12s %9.0f%% %10.2f %8.0f%% %s\n",
                is_none ? "none" : "offload", mib(row->resident).c_str(),
                none.resident > 0 ? 100.0 * row->resident / none.resident : 0.0,
                mib(row->summary.offloaded_bytes).c_str(), 0.0, row->step_ms,
                none.step_ms > 0 ? 100.0 * (row->step_ms / none.step_ms - 1.0) : 0.0,
                is_none ? "-" : (identical ? "yes" : "NO"));
  }
  std::printf(
      "  (resident: saved storages still allocated when the forward returns; the offloaded ones "
      "leave. Recompute 0: nothing runs again. On a GPU the copies cross the link instead: "
      "bench/offload_bench)\n");
}
}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--repeats") repeats = std::max(1, std::stoi(argv[i + 1]));
  torch::manual_seed(0);
  std::vector<Model> models;
  models.push_back(
      {"cnn (the example's ResNet-8, batch 64, 32x32)", examples::make_resnet(16, {1, 1, 1}), [] {
         return torch::randn({64, 3, 32, 32});
       }});
  models.push_back(
      {"mlp chain (12 pre-norm MLP blocks, width 256, 32x128 tokens)", mlp_chain(256, 12), [] {
         return torch::randn({32 * 128, 256});
       }});
  std::printf("checkpoint_bench: %d timed runs per row (median), CPU threads %d\n", repeats,
              at::get_num_threads());
  for (Model& m : models) {
    m.seq->train();
    bench_model(m, repeats);
    bench_offload(m, repeats);
  }
  bench_planner();
  return 0;
}
