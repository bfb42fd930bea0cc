// The joint keep/recompute/offload planner's cost on 200-unit chains (issue 26, item 3: "200 units
// plan in under 1 s"): a pre-norm transformer block chain (9 saved groups a block, sizes jittered
// so no two blocks are alike) and random units of 2 to 8 groups of all-distinct sizes and times
// (the fronts' worst case), without a link and with a 12 GB/s one, at 50 % and 33 % of the
// everything-kept peak. Prints wall and CPU time per plan beside what the plan predicts.
//   activation_plan_bench [UNITS]
#include <fathom/activation_planner.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

namespace {

using fathom::ActivationUnit;
using fathom::kUnitInput;
using fathom::SavedGroup;

// One block of a pre-norm transformer, activation bytes in units of x (batch x seq x hidden,
// 4 MiB), times in ms on a mid-range GPU; the residual adds save nothing and sit in their groups.
ActivationUnit transformer_block(int i, std::mt19937& rng) {
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  const double x = 4.0 * (1 << 20);
  auto bytes = [&](double n) { return static_cast<std::int64_t>(n * x * jitter(rng)); };
  auto ms = [&](double t) { return t * jitter(rng); };
  ActivationUnit u;
  u.name = "block" + std::to_string(i);
  u.input_bytes = static_cast<std::int64_t>(x);
  u.input_saved_bytes = u.input_bytes;  // the first norm saves its input
  u.output_bytes = u.input_bytes;
  u.groups = {
      {"ln1", bytes(1), ms(0.2), 5e6, false, {kUnitInput}},
      {"qkv", bytes(3), ms(2.0), 3e9, true, {0}},
      {"attention", bytes(1.1), ms(3.0), 4e9, true, {1}},
      {"out_proj+add", bytes(1), ms(0.8), 1e9, true, {2, kUnitInput}},
      {"ln2", bytes(1), ms(0.2), 5e6, false, {3}},
      {"fc1", bytes(4), ms(2.7), 4e9, true, {4}},
      {"gelu", bytes(4), ms(0.4), 2e7, false, {5}},
      {"fc2+add", 0, ms(2.7), 4e9, true, {6, 3}},  // its output is saved by the next block
  };
  return u;
}

ActivationUnit random_unit(int i, std::int64_t input, std::mt19937& rng) {
  std::uniform_int_distribution<std::int64_t> bytes(1 << 16, 64 << 20);
  std::uniform_real_distribution<double> ms(0.05, 4.0);
  std::uniform_int_distribution<int> groups(2, 8);
  std::bernoulli_distribution coin(0.5);
  ActivationUnit u;
  u.name = "unit" + std::to_string(i);
  u.input_bytes = input;
  u.input_saved_bytes = coin(rng) ? input : 0;
  u.output_bytes = bytes(rng);
  const int m = groups(rng);
  for (int g = 0; g < m; ++g) {
    SavedGroup s;
    s.name = "g" + std::to_string(g);
    s.saved_bytes = g + 1 == m ? u.output_bytes : bytes(rng);
    s.forward_ms = ms(rng);
    s.flops = s.forward_ms * 1e9;
    s.expensive = coin(rng);
    if (g == 0 || coin(rng)) s.inputs.push_back(kUnitInput);
    if (g > 0) s.inputs.push_back(std::uniform_int_distribution<int>(0, g - 1)(rng));
    u.groups.push_back(s);
  }
  return u;
}

void run(const char* model, const std::vector<ActivationUnit>& units, double link) {
  fathom::ActivationPlanOptions options;
  options.link_bytes_per_second = link;
  const std::int64_t full =
      fathom::plan_activations(units, INT64_MAX, options).unconstrained_peak_bytes;
  for (double fraction : {0.5, 0.33}) {
    const auto budget = static_cast<std::int64_t>(fraction * static_cast<double>(full));
    const auto wall0 = std::chrono::steady_clock::now();
    const std::clock_t cpu0 = std::clock();
    const fathom::ActivationPlan p = fathom::plan_activations(units, budget, options);
    const double cpu = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    std::printf(
        "%-12s %3zu units  link %4.0f GB/s  budget %2.0f%%  plan %6.3f s wall %6.3f s CPU  "
        "%s%s  peak %4.1f%%  extra %7.2f ms (recompute %5.1f%% of forward FLOPs, exposed "
        "transfer %.2f ms, offloaded %5.1f%% of kept-all)\n",
        model, units.size(), link / 1e9, fraction * 100, wall, cpu,
        p.feasible ? "feasible" : "INFEASIBLE", p.exact ? "" : " (thinned)",
        100.0 * double(p.cost.peak_bytes) / double(full), p.cost.extra_ms(),
        p.forward_flops > 0 ? 100.0 * p.cost.recompute_flops / p.forward_flops : 0.0,
        p.cost.exposed_transfer_ms,
        100.0 * double(p.cost.offloaded_bytes) /
            double(p.cost.kept_bytes + p.cost.offloaded_bytes + p.cost.recomputed_bytes));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 200;
  std::mt19937 rng(26);
  std::vector<ActivationUnit> transformer, random;
  for (int i = 0; i < n; ++i) transformer.push_back(transformer_block(i, rng));
  std::int64_t input = 8 << 20;
  for (int i = 0; i < n; ++i) {
    random.push_back(random_unit(i, input, rng));
    input = random.back().output_bytes;
  }
  for (double link : {0.0, 12e9}) {
    run("transformer", transformer, link);
    run("random", random, link);
  }
  // What thinning the fronts to the default 1024 points costs against 8x as many.
  for (const auto* chain : {&transformer, &random}) {
    fathom::ActivationPlanOptions options;
    const std::int64_t full =
        fathom::plan_activations(*chain, INT64_MAX, options).unconstrained_peak_bytes;
    const auto budget = full / 2;
    const std::clock_t cpu0 = std::clock();
    const double thinned = fathom::plan_activations(*chain, budget, options).cost.extra_ms();
    const double cpu_thinned = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
    options.max_front_points = 8192;
    const std::clock_t cpu1 = std::clock();
    const double wide = fathom::plan_activations(*chain, budget, options).cost.extra_ms();
    const double cpu_wide = double(std::clock() - cpu1) / CLOCKS_PER_SEC;
    std::printf(
        "%-12s 50%%: extra %.2f ms with 1024-point fronts (%.3f s CPU), %.2f ms with 8192 "
        "(%.3f s CPU): %.3fx\n",
        chain == &transformer ? "transformer" : "random", thinned, cpu_thinned, wide, cpu_wide,
        wide > 0 ? thinned / wide : 1.0);
  }
}
