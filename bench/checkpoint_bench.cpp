// Activation checkpointing on three models (the example's ResNet-8, a chain of pre-norm MLP
// blocks, a chain of pre-norm transformer blocks: attention + MLP), each with no checkpointing,
// sqrt(n) equal segments (checkpoint_sequential), fathom's block plan, selective checkpointing
// (keep the matrix products, convolutions and attention; recompute the rest) and the joint plan
// Auto mode makes and runs (keep, recompute or offload per op group; without a link, and with
// the CPU offload stand-in's) at 50 % and 33 % of the unchecked run's measured activation peak.
// Then how long the planner takes for a chain of 200 blocks. Offload rows follow each model's
// table (bench_offload).
//
//   checkpoint_bench [--repeats N] [--json FILE] [--model cnn|mlp|transformer]
//
// Columns: "peak" is the measured activation peak of a forward+backward step (bytes alive above
// the parameters, gradients and batch, counted by a CPU allocator wrapper) and its share of the
// unchecked run's; "pred." is the block planner's prediction of its own plans; "recomp. FLOPs"
// is what fathom's FLOP counter counts in backward beyond the unchecked run's backward, as a share
// of the forward's FLOPs (deterministic; pointwise ops have no FLOP formula, so recomputing them
// counts 0: step time shows their cost); "step" is the median forward+backward wall time, "cpu"
// its process CPU time, and the overhead over no checkpointing; "grads" says whether every
// parameter's gradient equals the unchecked run's bit for bit. CPU runs are short: read ratios.
// --json writes one row per model, strategy and budget: {model, strategy, budget, peak_fraction,
// recompute_flop_fraction, gradients_identical}.
#include <fathom/checkpoint_planner.h>
#include <fathom/fathom.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "checkpoint/mixed_unit.h"
#include "cpu_peak_allocator.h"
#include "measure/op_flop_callback.h"
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

// A GPT-like chain: pre-norm causal self-attention and a pre-norm MLP, each with a residual.
// Tokens travel as [batch * seq, width] (the products are 2-D addmm, as in a fused GPT).
struct TransformerBlockImpl : torch::nn::Module {
  TransformerBlockImpl(std::int64_t width, std::int64_t heads, std::int64_t seq)
      : heads(heads),
        seq(seq),
        norm1(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
        qkv(register_module("qkv", torch::nn::Linear(width, 3 * width))),
        proj(register_module("proj", torch::nn::Linear(width, width))),
        norm2(register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
        up(register_module("up", torch::nn::Linear(width, 4 * width))),
        down(register_module("down", torch::nn::Linear(4 * width, width))) {}
  at::Tensor forward(const at::Tensor& x) {
    const std::int64_t n = x.size(0), c = x.size(1), b = n / seq;
    const at::Tensor t = qkv->forward(norm1->forward(x))
                             .view({b, seq, 3, heads, c / heads})
                             .permute({2, 0, 3, 1, 4});
    const at::Tensor a = at::scaled_dot_product_attention(t[0], t[1], t[2], {}, 0.0,
                                                          /*is_causal=*/true);
    const at::Tensor y = x + proj->forward(a.transpose(1, 2).reshape({n, c}));
    return y + down->forward(torch::gelu(up->forward(norm2->forward(y))));
  }
  std::int64_t heads, seq;
  torch::nn::LayerNorm norm1;
  torch::nn::Linear qkv, proj;
  torch::nn::LayerNorm norm2;
  torch::nn::Linear up, down;
};
TORCH_MODULE(TransformerBlock);

torch::nn::Sequential transformer_chain(std::int64_t width, std::int64_t heads, std::int64_t seq,
                                        int blocks) {
  torch::nn::Sequential chain;
  for (int i = 0; i < blocks; ++i) chain->push_back(TransformerBlock(width, heads, seq));
  chain->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  chain->push_back(torch::nn::Linear(width, 256));
  return chain;
}

torch::nn::Sequential mlp_chain(std::int64_t width, int blocks) {
  torch::nn::Sequential seq;
  for (int i = 0; i < blocks; ++i) seq->push_back(MlpBlock(width));
  seq->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  seq->push_back(torch::nn::Linear(width, 256));
  return seq;
}

struct Model {
  std::string name;  // short, for --json
  std::string title;
  torch::nn::Sequential seq;
  at::Tensor x;  // one batch, the same for every run
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
        loss = fathom::forward(m.seq, m.x).pow(2).mean();
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

// One row: how the Sequential's items are checkpointed.
struct Strategy {
  std::string name;   // none, sqrt(n), block, selective, joint (offload: bench_offload)
  double budget = 0;  // the share of the unchecked peak it was planned for; 0: none
  std::string label;  // as printed
  std::vector<fathom::CheckpointSegment> segments;  // of the Sequential's items
  bool selective = false;                           // keep(expensive_ops()) in every segment
  std::int64_t predicted_peak = -1;                 // the block planner's, where it planned
  bool infeasible = false;                          // the least-memory plan, above the budget
  bool session_plan = false;  // joint: the Sequential runs as the open session's Auto plan says
};

struct Outcome {
  std::int64_t peak = 0;
  std::int64_t forward_flops = 0, backward_flops = 0;
  double step_ms = 0, cpu_ms = 0;
  std::vector<at::Tensor> grads;
};

const fathom::CheckpointOptions& keep_expensive() {
  static const fathom::CheckpointOptions o =
      fathom::CheckpointOptions().keep(fathom::expensive_ops());
  return o;
}

at::Tensor step_loss(Model& m, const Strategy& s) {
  const at::Tensor y = s.session_plan ? fathom::forward(m.seq, m.x)
                       : s.selective  ? fathom::forward(m.seq, m.x, s.segments, keep_expensive())
                                      : fathom::forward(m.seq, m.x, s.segments);
  return y.pow(2).mean();
}

// Gradients are zeroed in place (allocated by the first run), so no measured run allocates them.
void zero_grads(Model& m) {
  for (auto& p : m.seq->parameters())
    if (p.grad().defined()) p.mutable_grad().zero_();
}

std::int64_t measure_peak(Model& m, const Strategy& s, bench::CpuPeakAllocator& alloc) {
  zero_grads(m);
  alloc.reset_peak();
  step_loss(m, s).backward();
  return alloc.peak_since_reset();
}

Outcome evaluate(Model& m, const Strategy& s, int repeats, bench::CpuPeakAllocator& alloc) {
  Outcome r;
  zero_grads(m);
  step_loss(m, s).backward();  // warm-up
  r.peak = measure_peak(m, s, alloc);
  for (const auto& p : m.seq->parameters()) r.grads.push_back(p.grad().clone());
  {
    fathom::detail::FlopTally tally;
    {
      fathom::detail::OpFlopCallback counting(tally);
      zero_grads(m);
      tally.set_phase(0);
      const at::Tensor loss = step_loss(m, s);
      tally.set_phase(1);
      loss.backward();
    }
    for (const auto& e : tally.take())
      (e.phase == 0 ? r.forward_flops : r.backward_flops) += e.flops;
  }
  std::vector<double> wall, cpu;
  for (int i = 0; i < repeats; ++i) {
    zero_grads(m);
    const auto t = std::chrono::steady_clock::now();
    const std::clock_t c = std::clock();
    step_loss(m, s).backward();
    cpu.push_back(1e3 * static_cast<double>(std::clock() - c) / CLOCKS_PER_SEC);
    wall.push_back(seconds_since(t) * 1e3);
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  r.step_ms = wall[wall.size() / 2];
  r.cpu_ms = cpu[cpu.size() / 2];
  return r;
}

bool identical(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

std::string mib(std::int64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(b) / 1048576.0);
  return s;
}

struct JsonRow {
  std::string model, strategy;
  double budget = 0;
  double peak_fraction = 0, recompute_flop_fraction = 0;
  bool gradients_identical = false;
  // What peak_fraction measures: the allocator's peak over a step, or (the offload rows, which
  // offload every item whatever the budget) the saved bytes still resident on the device when
  // the forward returns.
  std::string peak_measure = "step_peak";
};

constexpr double kBudgets[] = {0.5, 0.33};

// Selective checkpointing at a budget, searched by measured peak: the k items that save the
// most in the forward (k = 1, 2, ...) are checkpointed with keep(expensive_ops()), either each as
// its own segment (a recompute holds one item's cheap activations at a time) or with adjacent
// ones merged (a segment's inner boundaries are not kept: a stem's conv, bn and relu as one); the
// first plan that meets the budget, else the one with the least peak.
std::vector<Strategy> selective_rows(Model& m, const std::vector<fathom::ChainBlock>& chain,
                                     std::int64_t none_peak, bench::CpuPeakAllocator& alloc) {
  std::vector<int> order(chain.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return chain[a].own_bytes > chain[b].own_bytes; });
  // Candidates in the order tried, with their measured peaks (shared by both budgets).
  std::vector<std::pair<std::vector<fathom::CheckpointSegment>, std::int64_t>> tried;
  auto peak_of = [&](const std::vector<fathom::CheckpointSegment>& segments) {
    for (const auto& [seg, p] : tried)
      if (seg == segments) return p;
    Strategy probe;
    probe.segments = segments;
    probe.selective = true;
    const std::int64_t p = measure_peak(m, probe, alloc);
    tried.emplace_back(segments, p);
    return p;
  };
  std::vector<Strategy> rows;
  for (double share : kBudgets) {
    const auto budget = static_cast<std::int64_t>(share * static_cast<double>(none_peak));
    Strategy s;
    s.name = "selective";
    s.budget = share;
    s.selective = true;
    std::int64_t best = -1;
    bool met = false;
    for (std::size_t k = 1; k <= order.size() && !met; ++k) {
      std::vector<int> items(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
      std::sort(items.begin(), items.end());
      std::vector<fathom::CheckpointSegment> each, merged;
      for (int i : items) {
        each.push_back({i, i + 1});
        if (!merged.empty() && merged.back().end == i)
          merged.back().end = i + 1;
        else
          merged.push_back({i, i + 1});
      }
      for (const auto* segments : {&each, &merged}) {
        const std::int64_t p = peak_of(*segments);
        if (best < 0 || p < best) {
          best = p;
          s.segments = *segments;
        }
        if (p <= budget) {
          s.segments = *segments;
          met = true;
          break;
        }
      }
    }
    s.infeasible = !met;
    char label[48];
    std::snprintf(label, sizeof label, "selective @ %.0f%%%s", share * 100, met ? "" : "*");
    s.label = label;
    rows.push_back(s);
  }
  return rows;
}

// The offload stand-in's link for the joint rows with offloading: 25 GB/s each way, what a PCIe
// 4.0 x16 link moves (mixed_unit.h: on a CPU the offloaded groups take the CPU copy path, whose
// host copies are malloc'd outside the allocator this bench counts, as pinned host memory is
// outside the CUDA allocator).
constexpr double kStandInLink = 25e9;

struct JointRow {
  Strategy strategy;
  Outcome outcome;
  fathom::ActivationPlanReport plan;  // as the session reported it
  bool planned = false;
};

// A joint row: fathom's Auto mode measures every block's op groups in its first steps, plans keep,
// recompute or offload per group under the budget (activation_plan.h; budget: the planners'
// bytes for `share`, as the block rows') and runs the plan (mixed_unit.h); the row is measured
// while the session's epoch is open, so every step runs the plan. link: the stand-in's (0: none, so
// nothing is offloaded and the plan only keeps or recomputes).
JointRow joint_row(Model& m, double share, std::int64_t budget, double link, int repeats,
                   bench::CpuPeakAllocator& alloc) {
  fathom::detail::set_cpu_offload_stand_in(link);
  JointRow r;
  r.strategy.name = link > 0 ? "joint" : "joint (no link)";
  r.strategy.budget = share;
  r.strategy.session_plan = true;
  {
    fathom::Session session(fathom::Options()
                                .mode(fathom::Mode::Auto)
                                .print_report(false)
                                .report_dir("/tmp/fathom-checkpoint-bench")
                                .run_name(m.name + "-joint")
                                .checkpoint_budget(fathom::MemoryBudget::bytes(budget)));
    fathom::configure_amp(session, fathom::AmpOptions().when(fathom::AmpOptions::When::Never));
    session.watch(*m.seq);
    {
      auto e = session.epoch();
      for (int s = 0; s < 3; ++s) {  // the profiled steps: measured, then planned
        auto step = e.step();
        zero_grads(m);
        fathom::forward(m.seq, m.x).pow(2).mean().backward();
      }
      r.outcome = evaluate(m, r.strategy, repeats, alloc);
    }
    const auto& modules = session.report().epochs.at(0).modules;
    if (modules && !modules->activation_plans.empty()) {
      r.plan = modules->activation_plans.front();
      r.planned = true;
      r.strategy.predicted_peak = r.plan.predicted_peak_bytes;
      r.strategy.infeasible = !r.plan.feasible;
    }
  }
  fathom::detail::set_cpu_offload_stand_in(0);
  char label[48];
  std::snprintf(label, sizeof label, "%s @ %.0f%%%s", link > 0 ? "joint" : "joint, no link",
                share * 100, r.strategy.infeasible ? "*" : "");
  r.strategy.label = label;
  return r;
}

void bench_model(Model& m, int repeats, bench::CpuPeakAllocator& alloc,
                 std::vector<JsonRow>& json) {
  const std::vector<fathom::ChainBlock> chain = measure(m);
  const fathom::FusedChain fused = fuse_aliasing_blocks(chain);
  const fathom::PlanCost none_pred = fathom::evaluate_plan(fused.blocks, {});
  std::printf("\n%s: %zu items, %zu blocks after merging views and in-place modules\n",
              m.title.c_str(), chain.size(), fused.blocks.size());

  std::vector<Strategy> rows;
  rows.push_back({"none", 0, "none", {}, false, none_pred.peak_bytes});
  const Outcome none = evaluate(m, rows[0], repeats, alloc);
  // The budgets are of the measured peak, as on a GPU, where fathom plans against the allocator's
  // step peak: the planners are given share x that peak less what the plain run holds beyond
  // their model (the loss's tensors, the gradients flowing between blocks), which no plan changes.
  const std::int64_t beyond_model = std::max<std::int64_t>(0, none.peak - none_pred.peak_bytes);
  auto budget_for = [&](double share) {
    return std::max<std::int64_t>(
        0, static_cast<std::int64_t>(share * static_cast<double>(none.peak)) - beyond_model);
  };
  {
    const auto segs = fathom::sqrt_segments(static_cast<int>(fused.blocks.size()));
    rows.push_back({"sqrt(n)", 0, "sqrt(n) segments", fathom::unfuse_segments(fused, segs), false,
                    fathom::evaluate_plan(fused.blocks, segs).peak_bytes});
  }
  for (double share : kBudgets) {
    fathom::CheckpointPlan plan = fathom::plan_checkpoints(fused.blocks, budget_for(share));
    Strategy s;
    s.name = "block";
    s.budget = share;
    if (!plan.feasible) {
      // Single-level checkpointing cannot go below about 2 sqrt(n) activations: the least.
      s.infeasible = true;
      plan = fathom::plan_checkpoints(fused.blocks, plan.min_feasible_budget_bytes);
    }
    char label[48];
    std::snprintf(label, sizeof label, "block @ %.0f%%%s", share * 100, s.infeasible ? "*" : "");
    s.label = label;
    s.segments = fathom::unfuse_segments(fused, plan.segments);
    s.predicted_peak = fathom::evaluate_plan(fused.blocks, plan.segments).peak_bytes;
    rows.push_back(s);
  }
  for (Strategy& s : selective_rows(m, chain, none.peak, alloc)) rows.push_back(std::move(s));
  std::vector<JointRow> joint;
  for (double link : {0.0, kStandInLink})
    for (double share : kBudgets)
      joint.push_back(joint_row(m, share, budget_for(share), link, repeats, alloc));
  std::printf(
      "  (planned for the measured peak's share less %s the plain run holds beyond the "
      "planners' model)\n",
      mib(beyond_model).c_str());

  std::printf("  %-18s %4s %11s %6s %11s %13s %9s %9s %9s %6s\n", "strategy", "segs", "peak",
              "of none", "pred.", "recomp. FLOPs", "step ms", "cpu ms", "overhead", "grads");
  auto print_row = [&](const Strategy& s, const Outcome& got) {
    const double peak_fraction = static_cast<double>(got.peak) / static_cast<double>(none.peak);
    const double flop_fraction =
        none.forward_flops > 0 ? static_cast<double>(got.backward_flops - none.backward_flops) /
                                     static_cast<double>(none.forward_flops)
                               : 0.0;
    const bool same = identical(none.grads, got.grads);
    std::printf("  %-18s %4zu %11s %6.0f%% %11s %12.0f%% %9.1f %9.1f %8.0f%% %6s\n",
                s.label.c_str(), s.segments.size(), mib(got.peak).c_str(), 100 * peak_fraction,
                s.predicted_peak >= 0 ? mib(s.predicted_peak).c_str() : "-", 100 * flop_fraction,
                got.step_ms, got.cpu_ms, 100.0 * (got.step_ms / none.step_ms - 1.0),
                same ? "same" : "DIFFER");
    json.push_back({m.name, s.name, s.budget, peak_fraction, flop_fraction, same});
  };
  for (const Strategy& s : rows)
    print_row(s, s.name == "none" ? none : evaluate(m, s, repeats, alloc));
  for (const JointRow& j : joint) print_row(j.strategy, j.outcome);
  for (const Strategy& s : rows) {
    if (s.segments.empty()) continue;
    std::printf("  %-18s checkpoints", s.label.c_str());
    for (const auto& seg : s.segments) std::printf(" [%d, %d)", seg.begin, seg.end);
    std::printf(" of the Sequential's items\n");
  }
  for (const JointRow& j : joint) {
    if (!j.planned) {
      std::printf("  %-18s no joint plan was made (the blocks' op groups were not measured)\n",
                  j.strategy.label.c_str());
      continue;
    }
    std::int64_t kept = 0, recomputed = 0, offloaded = 0;
    for (const fathom::ActivationModuleRow& row : j.plan.modules) {
      kept += row.kept_bytes;
      recomputed += row.recomputed_bytes;
      offloaded += row.offloaded_bytes;
    }
    std::printf("  %-18s kept %s, recomputed %s, offloaded %s of the blocks' saved bytes%s\n",
                j.strategy.label.c_str(), mib(kept).c_str(), mib(recomputed).c_str(),
                mib(offloaded).c_str(), j.plan.applied ? "" : " (NOT APPLIED)");
  }
  std::printf(
      "  * the budget is below what any plan of this kind reaches: the row is its least-memory "
      "plan\n");
}

void write_json(const std::string& path, const std::vector<JsonRow>& rows) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "checkpoint_bench: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::fprintf(f, "[\n");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const JsonRow& r = rows[i];
    char budget[16] = "null";
    if (r.budget > 0) std::snprintf(budget, sizeof budget, "%.2f", r.budget);
    std::fprintf(f,
                 "  {\"model\": \"%s\", \"strategy\": \"%s\", \"budget\": %s, "
                 "\"peak_fraction\": %.4f, \"recompute_flop_fraction\": %.4f, "
                 "\"gradients_identical\": %s, \"peak_measure\": \"%s\"}%s\n",
                 r.model.c_str(), r.strategy.c_str(), budget, r.peak_fraction,
                 r.recompute_flop_fraction, r.gradients_identical ? "true" : "false",
                 r.peak_measure.c_str(), i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "]\n");
  std::fclose(f);
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
  std::int64_t step_peak = 0;  // as the table's peak column: the allocator's, over one step
  fathom::OffloadSummary summary;
  double step_ms = 0;
  std::vector<at::Tensor> grads;
};

// Every item of the Sequential as one unit under fathom::offload (the CPU copy path here: the
// "host copy" a separate buffer, so what leaves the device is measured as on a GPU), or plain
// (fetch_ahead < -1). fetch_ahead: OffloadOptions::fetch_ahead.
OffloadRun run_offload(Model& m, const at::Tensor& x, int fetch_ahead, int repeats,
                       bench::CpuPeakAllocator& alloc) {
  const bool offloaded = fetch_ahead >= -1;
  OffloadRun r;
  std::vector<double> times;
  for (int i = 0; i < repeats + 2; ++i) {
    zero_grads(m);
    fathom::OffloadMeter meter;
    const auto options =
        fathom::OffloadOptions().cpu_copy(true).min_bytes(0).meter(meter).fetch_ahead(fetch_ahead);
    const bool peak_run = i == 1;  // after a warm-up, untimed
    if (peak_run) alloc.reset_peak();
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
    h = at::Tensor();
    if (peak_run) r.step_peak = alloc.peak_since_reset();
    if (i > 1) times.push_back(seconds_since(t) * 1e3);
    r.resident = resident;
    r.summary = meter.summary();
  }
  std::sort(times.begin(), times.end());
  r.step_ms = times[times.size() / 2];
  for (const auto& p : m.seq->parameters()) r.grads.push_back(p.grad().clone());
  return r;
}

// Each item offloaded whole, its tensors back all at once, one ahead of the one in use, or each
// at its use: the last is the least any plan of keep, recompute or offload reaches on this model
// (every saved tensor off the device but the one backward is using), so a budget under its step
// peak is one no plan meets; the rest of it is the gradients between the ops and their
// transients, which no plan changes.
void bench_offload(Model& m, int repeats, bench::CpuPeakAllocator& alloc,
                   std::vector<JsonRow>& json) {
  const at::Tensor& x = m.x;
  struct Row {
    const char* label;
    const char* name;  // for --json
    int fetch_ahead;
    OffloadRun run;
  };
  std::vector<Row> rows{{"none", "none", -2, {}},
                        {"offload", "offload", -1, {}},
                        {"offload, 1 ahead", "offload_one_ahead", 1, {}},
                        {"offload, at use", "offload_at_use", 0, {}}};
  for (Row& r : rows) r.run = run_offload(m, x, r.fetch_ahead, repeats, alloc);
  const OffloadRun& none = rows[0].run;
  std::printf(
      "  offload rows (each Sequential item under fathom::offload, the CPU copy path; its tensors "
      "back all at once, one ahead, or at their use):\n");
  std::printf("  %-18s %10s %9s %10s %9s %10s %10s %9s %s\n", "strategy", "resident", "of none",
              "step peak", "of none", "offloaded", "step ms", "overhead", "gradients_identical");
  for (const Row& row : rows) {
    const bool is_none = &row == &rows[0];
    bool identical = none.grads.size() == row.run.grads.size();
    for (std::size_t i = 0; identical && i < none.grads.size(); ++i)
      identical = torch::equal(none.grads[i], row.run.grads[i]);
    const double resident_fraction =
        none.resident > 0 ? static_cast<double>(row.run.resident) / none.resident : 0.0;
    const double peak_fraction =
        none.step_peak > 0 ? static_cast<double>(row.run.step_peak) / none.step_peak : 0.0;
    std::printf("  %-18s %10s %8.0f%% %10s %8.0f%% %10s %10.2f %8.0f%% %s\n", row.label,
                mib(row.run.resident).c_str(), 100 * resident_fraction,
                mib(row.run.step_peak).c_str(), 100 * peak_fraction,
                mib(row.run.summary.offloaded_bytes).c_str(), row.run.step_ms,
                none.step_ms > 0 ? 100.0 * (row.run.step_ms / none.step_ms - 1.0) : 0.0,
                is_none ? "-" : (identical ? "yes" : "NO"));
    if (is_none) continue;
    if (row.fetch_ahead == -1)
      json.push_back(
          {m.name, row.name, 0, resident_fraction, 0.0, identical, "resident_after_forward"});
    json.push_back({m.name, row.name, 0, peak_fraction, 0.0, identical, "step_peak"});
  }
  std::printf(
      "  (resident: saved storages still allocated when the forward returns; the offloaded ones "
      "leave. Nothing runs again. \"at use\" is the least any plan reaches here: the rest of "
      "its step peak is the gradients between ops. On a GPU the copies cross the link instead: "
      "bench/offload_bench)\n");
}
}  // namespace

int main(int argc, char** argv) {
  int repeats = 3;
  std::string json_path, only;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--repeats") repeats = std::max(1, std::stoi(argv[i + 1]));
    if (std::string(argv[i]) == "--json") json_path = argv[i + 1];
    if (std::string(argv[i]) == "--model") only = argv[i + 1];
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows appear as they are measured
  bench::CpuPeakAllocator alloc;  // before the models: their parameters are counted out anyway
  torch::manual_seed(0);
  std::vector<Model> models;
  models.push_back({"cnn", "cnn (the example's ResNet-8, batch 64, 32x32)",
                    examples::make_resnet(16, {1, 1, 1}), torch::randn({64, 3, 32, 32})});
  models.push_back({"mlp", "mlp chain (12 pre-norm MLP blocks, width 256, 32x128 tokens)",
                    mlp_chain(256, 12), torch::randn({32 * 128, 256})});
  models.push_back({"transformer",
                    "transformer chain (6 pre-norm attention + MLP blocks, width 256, 8 heads, "
                    "16x128 tokens, causal)",
                    transformer_chain(256, 8, 128, 6), torch::randn({16 * 128, 256})});
  std::printf("checkpoint_bench: %d timed runs per row (median), CPU threads %d\n", repeats,
              at::get_num_threads());
  std::vector<JsonRow> json;
  for (Model& m : models) {
    if (!only.empty() && m.name != only) continue;
    m.seq->train();
    bench_model(m, repeats, alloc, json);
    bench_offload(m, repeats, alloc, json);
  }
  if (only.empty()) bench_planner();
  if (!json_path.empty()) write_json(json_path, json);
  return 0;
}
