#include <fathom/activation_planner.h>
#include <fathom/checkpoint_planner.h>
#include <fathom/error.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "activation_fixtures.h"

namespace fathom {
namespace {

using K = TensorChoice;
constexpr TensorChoice Keep = TensorChoice::Keep, Recompute = TensorChoice::Recompute,
                       Offload = TensorChoice::Offload;

using test::mlp_unit;

ActivationAssignment keep_all(const std::vector<ActivationUnit>& units) {
  ActivationAssignment a;
  for (const ActivationUnit& u : units) a.choices.emplace_back(u.groups.size(), Keep);
  return a;
}

TEST(ActivationPlan, ModelOfTwoUnitsByHand) {
  const std::vector<ActivationUnit> chain{mlp_unit("u1"), mlp_unit("u2")};
  // Everything kept: x0 100 + u1's 400 + x1 max(100, 100) + u2's 400 + x2 100 = 1100, and u2's
  // backward holds all of it.
  const ActivationCost all = evaluate_activations(chain, keep_all(chain));
  EXPECT_EQ(all.stored_bytes, 1100);
  EXPECT_EQ(all.peak_bytes, 1100);
  EXPECT_EQ(all.kept_bytes, 1000);
  EXPECT_EQ(all.extra_ms(), 0.0);

  // u1's GELU recomputed: stored 900; u2's backward holds 100 + 200 + 100 + 500 = 900; u1's
  // backward 100 + 200 kept + 100 output + 200 rebuilt = 600.
  ActivationAssignment a = keep_all(chain);
  a.choices[0][1] = Recompute;
  ActivationCost c = evaluate_activations(chain, a);
  EXPECT_EQ(c.stored_bytes, 900);
  EXPECT_EQ(c.peak_bytes, 900);
  EXPECT_EQ(c.recompute_ms, 1.0);
  EXPECT_EQ(c.recompute_flops, 200);
  EXPECT_EQ(c.recomputed_bytes, 200);
  ASSERT_EQ(c.units.size(), 2u);
  EXPECT_EQ(c.units[0].peak_bytes, 600);
  EXPECT_EQ(c.units[1].peak_bytes, 900);
  EXPECT_EQ(c.units[0].kept_bytes, 300);
  EXPECT_EQ(c.units[0].recomputed_bytes, 200);
  EXPECT_EQ(c.units[0].extra_ms(), 1.0);
  EXPECT_EQ(c.units[1].extra_ms(), 0.0);

  // The same GELU in u2 instead saves nothing at the peak: u2's backward holds all of u2.
  a = keep_all(chain);
  a.choices[1][1] = Recompute;
  EXPECT_EQ(evaluate_activations(chain, a).peak_bytes, 1100);

  // u1 as a whole-recompute segment: x0 100 held, u1's rebuild 400 + 100; then as kept.
  a = keep_all(chain);
  a.choices[0] = {Recompute, Recompute, Recompute};
  a.segments = {{0, 1}};
  c = evaluate_activations(chain, a);
  EXPECT_EQ(c.stored_bytes, 700);
  EXPECT_EQ(c.peak_bytes, 700);
  EXPECT_EQ(c.recompute_ms, 9.0);
  EXPECT_EQ(c.units[0].peak_bytes, 600);  // x0 and u1 rebuilt whole
  EXPECT_EQ(c.units[1].peak_bytes, 700);
}

TEST(ActivationPlan, ARecomputedGroupThatReadsTheUnitsInputHoldsAllOfIt) {
  // A pointwise first op saves nothing of its 300 B input; rebuilding it needs all of it.
  ActivationUnit u;
  u.name = "u";
  u.input_bytes = 300;
  u.input_saved_bytes = 0;
  u.output_bytes = 50;
  u.groups = {{"relu", 300, 1.0, 0, false, {kUnitInput}}, {"mm", 50, 3.0, 0, true, {0}}};
  const std::vector<ActivationUnit> chain{u};
  ActivationAssignment a = keep_all(chain);
  EXPECT_EQ(evaluate_activations(chain, a).stored_bytes, 350);  // 0 of x0, 300, 50
  a.choices[0][1] = Recompute;  // rebuilt from the kept relu: x0 not needed
  EXPECT_EQ(evaluate_activations(chain, a).stored_bytes, 300);
  a.choices[0] = {Recompute, Keep};  // rebuilt from x0: all 300 B of it held
  EXPECT_EQ(evaluate_activations(chain, a).stored_bytes, 350);
}

TEST(ActivationPlan, PlansTwoUnitsByHand) {
  const std::vector<ActivationUnit> chain{mlp_unit("u1"), mlp_unit("u2")};
  // 900: recompute u1's GELU, the cheapest group whose bytes u2's backward no longer holds.
  ActivationPlan p = plan_activations(chain, 900);
  ASSERT_TRUE(p.feasible) << p.message;
  EXPECT_TRUE(p.exact);
  EXPECT_EQ(p.cost.extra_ms(), 1.0);
  EXPECT_EQ(p.assignment.choices[0], (std::vector<K>{Keep, Recompute, Keep}));
  EXPECT_EQ(p.assignment.choices[1], (std::vector<K>{Keep, Keep, Keep}));
  EXPECT_EQ(p.unconstrained_peak_bytes, 1100);
  // 700: u2's backward holds x0, x1 and all of u2 (700), so u1 keeps nothing of its own; the
  // second matmul's output is x1, which u2 keeps anyway: 5 ms, not the 9 of recomputing u1 whole.
  p = plan_activations(chain, 700);
  ASSERT_TRUE(p.feasible) << p.message;
  EXPECT_EQ(p.cost.extra_ms(), 5.0);
  EXPECT_EQ(p.assignment.choices[0], (std::vector<K>{Recompute, Recompute, Keep}));
  EXPECT_LE(p.cost.peak_bytes, 700);
  EXPECT_NE(p.message.find("recompute 2"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("not measured"), std::string::npos) << p.message;
}

TEST(ActivationPlan, ABudgetNoPlanMeetsGivesTheLeastMemoryPlanAndTheBudgetThatFits) {
  const std::vector<ActivationUnit> chain{mlp_unit("u1"), mlp_unit("u2")};
  EXPECT_EQ(min_activation_budget(chain), 700);
  const ActivationPlan p = plan_activations(chain, 600);
  EXPECT_FALSE(p.feasible);
  EXPECT_EQ(p.min_feasible_budget_bytes, 700);
  EXPECT_EQ(p.cost.peak_bytes, 700);
  EXPECT_EQ(p.cost.extra_ms(), 5.0);  // the cheapest of the least-memory plans
  EXPECT_NE(p.message.find("700 bytes"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("raise the budget"), std::string::npos) << p.message;
}

TEST(ActivationPlan, OffloadsWhatTheLinkHidesAndRecomputesWhatItCannot) {
  const std::vector<ActivationUnit> chain{mlp_unit("u1"), mlp_unit("u2")};
  ActivationPlanOptions fast;
  fast.link_bytes_per_second = 1e5;  // 100 B a millisecond
  // u1's 400 B take 4 ms each way, hidden behind u2's 9 ms forward and 18 ms backward.
  ActivationPlan p = plan_activations(chain, 700, fast);
  ASSERT_TRUE(p.feasible) << p.message;
  EXPECT_EQ(p.cost.extra_ms(), 0.0);
  EXPECT_EQ(p.cost.offloaded_bytes, 400);
  EXPECT_EQ(p.assignment.choices[0], (std::vector<K>{Offload, Offload, Keep}));
  EXPECT_EQ(p.message.find("not measured"), std::string::npos) << p.message;

  // 900 needs 200 B of u1 gone: one group offloaded, not all that the link would hide.
  p = plan_activations(chain, 900, fast);
  ASSERT_TRUE(p.feasible) << p.message;
  EXPECT_EQ(p.cost.extra_ms(), 0.0);
  EXPECT_EQ(p.cost.offloaded_bytes, 200);

  ActivationPlanOptions slow;
  slow.link_bytes_per_second = 1e4;  // 200 B: 20 ms each way, (20 - 9) + (20 - 18) exposed
  ActivationAssignment a = keep_all(chain);
  a.choices[0][1] = Offload;
  EXPECT_DOUBLE_EQ(evaluate_activations(chain, a, slow).exposed_transfer_ms, 13.0);
  p = plan_activations(chain, 900, slow);
  ASSERT_TRUE(p.feasible) << p.message;
  EXPECT_EQ(p.cost.extra_ms(), 1.0);  // recomputing the GELU is cheaper
  EXPECT_EQ(p.cost.offloaded_bytes, 0);
  // The last unit's transfers have nothing to hide behind.
  a = keep_all(chain);
  a.choices[1][0] = Offload;
  EXPECT_DOUBLE_EQ(evaluate_activations(chain, a, fast).exposed_transfer_ms, 4.0);
}

TEST(ActivationPlan, AUnitThatRecomputesNothingHoldsItsFetchWindowNotAllItOffloaded) {
  // One unit, its groups offloaded: its backward brings them back one ahead of the one in use,
  // so it holds two at a time: at most twice the largest (2 x 300), not all four (950).
  ActivationUnit u;
  u.name = "block";
  u.input_bytes = 500;
  u.input_saved_bytes = 500;
  u.output_bytes = 50;
  u.groups = {{"conv", 300, 4.0, 0, true, {kUnitInput}},
              {"bn", 100, 1.0, 0, false, {0}},
              {"relu", 300, 1.0, 0, false, {1}},
              {"scale", 200, 1.0, 0, false, {2}},
              {"out", 50, 1.0, 0, false, {3}}};
  const std::vector<ActivationUnit> chain{u};
  ActivationPlanOptions link;
  link.link_bytes_per_second = 1e9;
  ActivationAssignment a = keep_all(chain);
  a.choices[0] = {Offload, Offload, Offload, Offload, Offload};
  ActivationCost c = evaluate_activations(chain, a, link);
  // Its input (500) kept at the boundary, nothing kept of its own, the window 600.
  EXPECT_EQ(c.units[0].peak_bytes, 500 + 600);
  EXPECT_EQ(c.offloaded_bytes, 950);
  // Its input offloaded too is one more item: none held at the boundary, 2 x 500 at backward.
  a.inputs = {Offload};
  c = evaluate_activations(chain, a, link);
  EXPECT_EQ(c.units[0].peak_bytes, 1000);
  EXPECT_EQ(c.offloaded_bytes, 1450);
  // Two offloaded groups are both back at once: the window is their sum.
  a = keep_all(chain);
  a.choices[0][1] = Offload;
  a.choices[0][3] = Offload;
  c = evaluate_activations(chain, a, link);
  EXPECT_EQ(c.units[0].peak_bytes, 500 + 300 + 300 + 50 + (100 + 200));
  // A unit that recomputes a group runs its recompute pass first, which may read what it
  // offloaded: all of it is back.
  a.choices[0] = {Offload, Offload, Recompute, Offload, Offload};
  c = evaluate_activations(chain, a, link);
  EXPECT_EQ(c.units[0].peak_bytes, 500 + 950);
  // The planner finds the window: at 1100 it offloads every group and recomputes nothing.
  const ActivationPlan p = plan_activations(chain, 1100, link);
  ASSERT_TRUE(p.feasible) << p.message;
  EXPECT_EQ(p.cost.recompute_ms, 0.0);
  EXPECT_LE(p.cost.peak_bytes, 1100);
}

TEST(ActivationPlan, KeepsAnExpensiveOutputToRebuildTheCheapOnesAfterIt) {
  // A unit whose matmul (8 ms) feeds three cheap pointwise groups: under a budget that must drop
  // 600 B of u1, rebuilding the pointwise groups from the kept matmul output (3 ms) beats
  // rebuilding them from the input (the matmul too, 11 ms).
  ActivationUnit u;
  u.input_bytes = 100;
  u.input_saved_bytes = 100;
  u.output_bytes = 100;
  u.groups = {{"mm", 200, 8.0, 0, true, {kUnitInput}},
              {"bias", 200, 1.0, 0, false, {0}},
              {"gelu", 200, 1.0, 0, false, {1}},
              {"scale", 200, 1.0, 0, false, {2}},
              {"mm2", 100, 8.0, 0, true, {3}}};
  u.name = "u1";
  ActivationUnit v = u;
  v.name = "u2";
  const std::vector<ActivationUnit> chain{u, v};
  EXPECT_EQ(evaluate_activations(chain, keep_all(chain)).peak_bytes, 1900);
  const ActivationPlan p = plan_activations(chain, 1300);
  ASSERT_TRUE(p.feasible) << p.message;
  EXPECT_EQ(p.cost.extra_ms(), 3.0);
  EXPECT_EQ(p.assignment.choices[0], (std::vector<K>{Keep, Recompute, Recompute, Recompute, Keep}));
}

TEST(ActivationPlan, NeverCostsMoreThanTheBlockPlanOnTheSameChain) {
  // A unit of two groups (its own bytes, then its output) is a ChainBlock; the joint planner
  // has every block plan among its choices.
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::int64_t> bytes(0, 800), io(1, 500);
  std::uniform_real_distribution<double> ms(0.1, 4.0);
  std::bernoulli_distribution keep(0.5);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 2 + trial % 10;
    std::vector<ChainBlock> blocks(n);
    std::vector<ActivationUnit> units(n);
    std::int64_t input = io(rng);
    for (int i = 0; i < n; ++i) {
      ChainBlock& b = blocks[i];
      b.own_bytes = bytes(rng);
      b.input_bytes = input;
      b.output_bytes = io(rng);
      b.input_saved_bytes = keep(rng) ? b.input_bytes : 0;
      b.output_saved_bytes = b.output_bytes;
      const double t1 = ms(rng), t2 = ms(rng);
      b.forward_ms = t1 + t2;
      input = b.output_bytes;
      units[i] = ActivationUnit{"u" + std::to_string(i),
                                b.input_bytes,
                                b.input_saved_bytes,
                                b.output_bytes,
                                {{"own", b.own_bytes, t1, 0, false, {kUnitInput}},
                                 {"out", b.output_saved_bytes, t2, 0, false, {0}}}};
    }
    const std::int64_t full = evaluate_plan(blocks, {}).peak_bytes;
    EXPECT_EQ(evaluate_activations(units, keep_all(units)).peak_bytes, full);
    EXPECT_LE(min_activation_budget(units), min_feasible_budget(blocks));
    for (double f : {0.5, 0.7, 0.9}) {
      const auto budget = static_cast<std::int64_t>(f * static_cast<double>(full));
      const CheckpointPlan old = plan_checkpoints(blocks, budget);
      const ActivationPlan joint = plan_activations(units, budget);
      if (!old.feasible) continue;
      ASSERT_TRUE(joint.feasible) << joint.message;
      EXPECT_LE(joint.cost.extra_ms(), old.recompute_ms + 1e-9) << "trial " << trial;
      EXPECT_LE(joint.cost.peak_bytes, budget);
    }
  }
}

// --- brute force over every assignment

std::vector<ActivationUnit> random_units(int n, int max_groups, std::mt19937& rng) {
  std::uniform_int_distribution<std::int64_t> bytes(0, 600), io(1, 400);
  std::uniform_real_distribution<double> ms(0.1, 5.0);
  std::uniform_int_distribution<int> groups(1, max_groups);
  std::bernoulli_distribution coin(0.5);
  std::vector<ActivationUnit> units(n);
  std::int64_t input = io(rng);
  for (int i = 0; i < n; ++i) {
    ActivationUnit& u = units[i];
    u.name = "u" + std::to_string(i);
    u.input_bytes = input;
    u.input_saved_bytes = coin(rng) ? input : 0;
    u.output_bytes = io(rng);
    const int m = groups(rng);
    for (int g = 0; g < m; ++g) {
      SavedGroup s;
      s.name = "g" + std::to_string(g);
      s.saved_bytes = g + 1 == m ? (coin(rng) ? u.output_bytes : 0) : bytes(rng);
      s.forward_ms = ms(rng);
      s.flops = 1000 * s.forward_ms;
      if (g == 0 || coin(rng)) s.inputs.push_back(kUnitInput);
      if (g > 0) s.inputs.push_back(std::uniform_int_distribution<int>(0, g - 1)(rng));
      u.groups.push_back(s);
    }
    input = u.output_bytes;
  }
  return units;
}

struct Best {
  double extra_ms = std::numeric_limits<double>::infinity();
  std::int64_t min_peak = std::numeric_limits<std::int64_t>::max();
};

// Every choice of every group of the units outside segments, for one set of segments.
void every_choice(const std::vector<ActivationUnit>& units, const ActivationPlanOptions& options,
                  ActivationAssignment& a, std::size_t flat, std::vector<std::pair<int, int>>& free,
                  std::int64_t budget, Best& best) {
  if (flat == free.size()) {
    const ActivationCost c = evaluate_activations(units, a, options);
    best.min_peak = std::min(best.min_peak, c.peak_bytes);
    if (c.peak_bytes <= budget) best.extra_ms = std::min(best.extra_ms, c.extra_ms());
    return;
  }
  // g == -1: the unit's input, kept or offloaded.
  const auto [i, g] = free[flat];
  for (TensorChoice c : {Keep, Recompute, Offload}) {
    if (c == Offload && options.link_bytes_per_second <= 0) continue;
    if (c == Recompute && g < 0) continue;
    (g < 0 ? a.inputs[i] : a.choices[i][g]) = c;
    every_choice(units, options, a, flat + 1, free, budget, best);
  }
  (g < 0 ? a.inputs[i] : a.choices[i][g]) = Keep;
}

// Every set of segments: each unit outside, starting a segment, or continuing the one before.
void every_segmentation(const std::vector<ActivationUnit>& units,
                        const ActivationPlanOptions& options, int i, bool in_segment,
                        ActivationAssignment& a, std::int64_t budget, Best& best) {
  const int n = static_cast<int>(units.size());
  if (i == n) {
    std::vector<std::pair<int, int>> free;
    std::vector<bool> inside(n, false);
    for (const CheckpointSegment& s : a.segments)
      for (int k = s.begin; k < s.end; ++k) inside[k] = true;
    a.inputs.assign(n, Keep);
    for (int k = 0; k < n; ++k) {
      a.choices[k].assign(units[k].groups.size(), inside[k] ? Recompute : Keep);
      if (inside[k]) continue;
      for (int g = 0; g < static_cast<int>(units[k].groups.size()); ++g) free.push_back({k, g});
      free.push_back({k, -1});
    }
    every_choice(units, options, a, 0, free, budget, best);
    return;
  }
  every_segmentation(units, options, i + 1, false, a, budget, best);
  a.segments.push_back({i, i + 1});
  every_segmentation(units, options, i + 1, true, a, budget, best);
  a.segments.pop_back();
  if (in_segment) {
    ++a.segments.back().end;
    every_segmentation(units, options, i + 1, true, a, budget, best);
    --a.segments.back().end;
  }
}

Best brute_force(const std::vector<ActivationUnit>& units, const ActivationPlanOptions& options,
                 std::int64_t budget) {
  ActivationAssignment a;
  a.choices.resize(units.size());
  Best best;
  every_segmentation(units, options, 0, false, a, budget, best);
  return best;
}

TEST(ActivationPlan, EqualsBruteForceOnSmallChains) {
  std::mt19937 rng(26);
  int compared = 0, with_offload = 0, with_input_offload = 0;
  for (int trial = 0; trial < 48; ++trial) {
    const int n = 1 + trial % 4;
    const int max_groups = n <= 2 ? 4 : (n == 3 ? 3 : 2);
    const std::vector<ActivationUnit> units = random_units(n, max_groups, rng);
    ActivationPlanOptions options;
    if (trial % 2 == 1)
      options.link_bytes_per_second = std::uniform_real_distribution<double>(
          2e4, 4e5)(rng);  // 20 to 400 B a millisecond: some hidden, some not
    const std::int64_t full = evaluate_activations(units, keep_all(units), options).peak_bytes;
    const Best floor = brute_force(units, options, -1);
    ASSERT_EQ(min_activation_budget(units, options), floor.min_peak) << "trial " << trial;
    for (double f : {0.3, 0.55, 0.75, 0.9, 1.0}) {
      const std::int64_t budget =
          floor.min_peak +
          static_cast<std::int64_t>(f * static_cast<double>(full - floor.min_peak));
      const Best best = brute_force(units, options, budget);
      const ActivationPlan plan = plan_activations(units, budget, options);
      ASSERT_TRUE(plan.feasible) << plan.message;
      EXPECT_TRUE(plan.exact);
      EXPECT_LE(plan.cost.peak_bytes, budget) << "trial " << trial;
      EXPECT_NEAR(plan.cost.extra_ms(), best.extra_ms, 1e-6) << "trial " << trial << " f " << f;
      ++compared;
      if (plan.cost.offloaded_bytes > 0) ++with_offload;
      for (TensorChoice c : plan.assignment.inputs) with_input_offload += c == Offload ? 1 : 0;
    }
    const ActivationPlan below = plan_activations(units, floor.min_peak - 1, options);
    EXPECT_FALSE(below.feasible);
    EXPECT_EQ(below.cost.peak_bytes, floor.min_peak);
  }
  EXPECT_EQ(compared, 48 * 5);
  EXPECT_GT(with_offload, 10);       // the offloading choices were exercised, not just allowed
  EXPECT_GT(with_input_offload, 0);  // ... of the units' inputs too
}

TEST(ActivationPlan, AThinnedFrontStillFitsTheBudgetAndSaysSo) {
  std::mt19937 rng(7);
  const std::vector<ActivationUnit> units = random_units(40, 4, rng);
  ActivationPlanOptions options;
  options.max_front_points = 4;
  const std::int64_t full = evaluate_activations(units, keep_all(units)).peak_bytes;
  const ActivationPlan thinned = plan_activations(units, full / 2, options);
  const ActivationPlan whole = plan_activations(units, full / 2);
  ASSERT_TRUE(thinned.feasible) << thinned.message;
  EXPECT_FALSE(thinned.exact);
  EXPECT_LE(thinned.cost.peak_bytes, full / 2);
  EXPECT_GE(thinned.cost.extra_ms(), whole.cost.extra_ms() - 1e-9);
}

TEST(ActivationPlan, BadInputIsRefusedWithTheFix) {
  std::vector<ActivationUnit> chain{mlp_unit("u1"), mlp_unit("u2")};
  ActivationAssignment a = keep_all(chain);
  a.choices[0][0] = Offload;
  try {
    evaluate_activations(chain, a);
    FAIL() << "offloading without a link was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no link bandwidth"), std::string::npos) << e.what();
  }
  a = keep_all(chain);
  a.segments = {{0, 1}};  // u1 in a segment but its groups kept
  EXPECT_THROW(evaluate_activations(chain, a), Error);
  a = keep_all(chain);
  a.choices[1].pop_back();
  EXPECT_THROW(evaluate_activations(chain, a), Error);
  chain[1].groups[1].inputs = {2};  // reads a later group
  EXPECT_THROW(plan_activations(chain, 1000), Error);
  chain[1].groups[1].inputs = {0};
  chain[0].groups[0].saved_bytes = -1;
  EXPECT_THROW(plan_activations(chain, 1000), Error);
  chain[0].groups[0].saved_bytes = 200;
  ActivationPlanOptions bad;
  bad.link_bytes_per_second = -1;
  EXPECT_THROW(plan_activations(chain, 1000, bad), Error);
  chain[0].groups.clear();
  EXPECT_THROW(plan_activations(chain, 1000), Error);
  EXPECT_TRUE(plan_activations({}, 0).feasible);
}

}  // namespace
}  // namespace fathom
