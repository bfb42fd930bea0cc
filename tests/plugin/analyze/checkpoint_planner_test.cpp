#include <fathom/checkpoint_planner.h>
#include <fathom/error.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace fathom {
namespace {

// A chain whose boundaries agree (block i's output is block i+1's input) and whose blocks keep
// all, or none, of their input and output, as real layers do.
std::vector<ChainBlock> random_chain(int n, std::mt19937& rng) {
  std::uniform_int_distribution<std::int64_t> own(0, 1000), io(1, 600);
  std::uniform_real_distribution<double> ms(0.1, 5.0);
  std::bernoulli_distribution keep(0.5);
  std::vector<ChainBlock> chain(n);
  std::int64_t input = io(rng);
  for (int i = 0; i < n; ++i) {
    ChainBlock& b = chain[i];
    b.name = "b" + std::to_string(i);
    b.own_bytes = own(rng);
    b.input_bytes = input;
    b.output_bytes = io(rng);
    b.input_saved_bytes = keep(rng) ? b.input_bytes : 0;
    b.output_saved_bytes = keep(rng) ? b.output_bytes : 0;
    b.forward_ms = ms(rng);
    input = b.output_bytes;
  }
  return chain;
}

struct Outcome {
  std::vector<CheckpointSegment> segments;
  PlanCost cost;
};

// Every plan: each block plain, starting a segment, or continuing the one before.
void every_plan(int n, int i, std::vector<CheckpointSegment>& segs, bool in_segment,
                const std::vector<ChainBlock>& chain, std::vector<Outcome>& out) {
  if (i == n) {
    out.push_back({segs, evaluate_plan(chain, segs)});
    return;
  }
  every_plan(n, i + 1, segs, false, chain, out);  // plain
  segs.push_back({i, i + 1});                     // start a segment
  every_plan(n, i + 1, segs, true, chain, out);
  segs.pop_back();
  if (in_segment) {  // continue it
    ++segs.back().end;
    every_plan(n, i + 1, segs, true, chain, out);
    --segs.back().end;
  }
}

std::vector<Outcome> brute_force(const std::vector<ChainBlock>& chain) {
  std::vector<Outcome> all;
  std::vector<CheckpointSegment> segs;
  every_plan(static_cast<int>(chain.size()), 0, segs, false, chain, all);
  return all;
}

TEST(CheckpointPlanner, ModelOfAThreeBlockChainByHand) {
  // x0 (100 B) -> A -> x1 (200 B) -> B -> x2 (300 B) -> C -> x3 (50 B)
  std::vector<ChainBlock> chain(3);
  chain[0] = {"A", 10, 100, 0, 100, 200, 1.0};  // keeps its input, like a Linear
  chain[1] = {"B", 20, 0, 300, 200, 300, 2.0};  // keeps its output, like a ReLU
  chain[2] = {"C", 30, 300, 0, 300, 50, 4.0};   // keeps its input
  const PlanCost plain = evaluate_plan(chain, {});
  // own 60 + x0 100 + x1 0 + x2 max(300, 300) + x3 0
  EXPECT_EQ(plain.stored_bytes, 460);
  EXPECT_EQ(plain.peak_bytes, 460);
  EXPECT_EQ(plain.recompute_ms, 0.0);

  // Checkpoint A and B: keep x0 (100), C keeps x2 (300) and its own 30. Recomputing [A, B] with
  // x0 held: 100 + own 10 + 20 + x1 max(0, 0) + x2 out of B 300 = 430.
  const PlanCost ab = evaluate_plan(chain, {{0, 2}});
  EXPECT_EQ(ab.stored_bytes, 430);
  EXPECT_EQ(ab.peak_bytes, 430);
  EXPECT_DOUBLE_EQ(ab.recompute_ms, 3.0);

  // Checkpoint B alone: A keeps x0 and 10 own; B's input x1 is kept (200); C keeps x2 and 30.
  // Stored 100 + 10 + 200 + 300 + 30 = 640; recomputing B: 100 + 10 + 200 + 20 + 300 = 630.
  const PlanCost b = evaluate_plan(chain, {{1, 2}});
  EXPECT_EQ(b.stored_bytes, 640);
  EXPECT_EQ(b.peak_bytes, 640);
}

TEST(CheckpointPlanner, RejectsMalformedSegments) {
  std::mt19937 rng(1);
  const auto chain = random_chain(5, rng);
  EXPECT_THROW(evaluate_plan(chain, {{2, 2}}), Error);
  EXPECT_THROW(evaluate_plan(chain, {{0, 3}, {2, 4}}), Error);
  EXPECT_THROW(evaluate_plan(chain, {{3, 6}}), Error);
  EXPECT_NO_THROW(evaluate_plan(chain, {{0, 2}, {2, 5}}));
}

TEST(CheckpointPlanner, AgreesWithBruteForceOnRandomChainsUpToTwelveBlocks) {
  std::mt19937 rng(42);
  int checked = 0;
  for (int trial = 0; trial < 48; ++trial) {
    const int n = 1 + trial % 12;
    const auto chain = random_chain(n, rng);
    const std::vector<Outcome> all = brute_force(chain);
    std::int64_t least = std::numeric_limits<std::int64_t>::max(), most = 0;
    for (const Outcome& o : all) {
      least = std::min(least, o.cost.peak_bytes);
      most = std::max(most, o.cost.peak_bytes);
    }
    ASSERT_EQ(min_feasible_budget(chain), least) << "n=" << n;
    std::uniform_int_distribution<std::int64_t> pick(least, most);
    std::vector<std::int64_t> budgets{least, most, pick(rng), pick(rng), pick(rng)};
    for (std::int64_t budget : budgets) {
      double best = std::numeric_limits<double>::infinity();
      for (const Outcome& o : all)
        if (o.cost.peak_bytes <= budget) best = std::min(best, o.cost.recompute_ms);
      const CheckpointPlan plan = plan_checkpoints(chain, budget);
      ASSERT_TRUE(plan.feasible) << plan.message;
      EXPECT_TRUE(plan.exact);
      EXPECT_NEAR(plan.recompute_ms, best, 1e-9) << "n=" << n << " budget=" << budget;
      const PlanCost cost = evaluate_plan(chain, plan.segments);
      EXPECT_LE(cost.peak_bytes, budget);
      EXPECT_EQ(cost.peak_bytes, plan.predicted_peak_bytes);
      EXPECT_EQ(cost.stored_bytes, plan.stored_bytes);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 48 * 5);
}

TEST(CheckpointPlanner, OneBlockSegmentsAgreeWithBruteForce) {
  // Blocks a loop runs one by one (fathom::block) are checkpointed one by one.
  std::mt19937 rng(43);
  for (int trial = 0; trial < 24; ++trial) {
    const int n = 1 + trial % 12;
    const auto chain = random_chain(n, rng);
    std::vector<Outcome> singles;
    for (Outcome& o : brute_force(chain)) {
      bool all_single = true;
      for (const CheckpointSegment& s : o.segments) all_single = all_single && s.end - s.begin == 1;
      if (all_single) singles.push_back(std::move(o));
    }
    std::int64_t least = std::numeric_limits<std::int64_t>::max(), most = 0;
    for (const Outcome& o : singles) {
      least = std::min(least, o.cost.peak_bytes);
      most = std::max(most, o.cost.peak_bytes);
    }
    ASSERT_EQ(min_feasible_budget(chain, 1), least);
    for (std::int64_t budget : {least, (least + most) / 2, most}) {
      double best = std::numeric_limits<double>::infinity();
      for (const Outcome& o : singles)
        if (o.cost.peak_bytes <= budget) best = std::min(best, o.cost.recompute_ms);
      const CheckpointPlan plan = plan_checkpoints(chain, budget, 1);
      ASSERT_TRUE(plan.feasible) << plan.message;
      EXPECT_NEAR(plan.recompute_ms, best, 1e-9);
      for (const CheckpointSegment& s : plan.segments) EXPECT_EQ(s.end - s.begin, 1);
    }
  }
}

TEST(CheckpointPlanner, SqrtSegmentsNeverBeatItAtEqualMemory) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 4 + trial * 5;
    const auto chain = random_chain(n, rng);
    const auto sqrt_plan = sqrt_segments(n);
    const PlanCost sqrt_cost = evaluate_plan(chain, sqrt_plan);
    const CheckpointPlan plan = plan_checkpoints(chain, sqrt_cost.peak_bytes);
    ASSERT_TRUE(plan.feasible) << plan.message;
    EXPECT_LE(plan.predicted_peak_bytes, sqrt_cost.peak_bytes);
    EXPECT_LE(plan.recompute_ms, sqrt_cost.recompute_ms + 1e-9) << "n=" << n;
  }
}

TEST(CheckpointPlanner, InfeasibleBudgetNamesTheLeastThatFits) {
  std::mt19937 rng(3);
  const auto chain = random_chain(10, rng);
  const std::int64_t least = min_feasible_budget(chain);
  const CheckpointPlan plan = plan_checkpoints(chain, least - 1);
  EXPECT_FALSE(plan.feasible);
  EXPECT_TRUE(plan.segments.empty());
  EXPECT_EQ(plan.min_feasible_budget_bytes, least);
  EXPECT_NE(plan.message.find(std::to_string(least) + " bytes"), std::string::npos) << plan.message;
  EXPECT_TRUE(plan_checkpoints(chain, least).feasible);
}

TEST(CheckpointPlanner, AmpleBudgetCheckpointsNothing) {
  std::mt19937 rng(5);
  const auto chain = random_chain(8, rng);
  const CheckpointPlan plan = plan_checkpoints(chain, 1LL << 40);
  EXPECT_TRUE(plan.feasible);
  EXPECT_TRUE(plan.segments.empty());
  EXPECT_EQ(plan.recompute_ms, 0.0);
  EXPECT_EQ(plan.predicted_peak_bytes, plan.unconstrained_peak_bytes);
}

TEST(CheckpointPlanner, TwoHundredBlocksPlanWithinBudget) {
  std::mt19937 rng(11);
  const auto chain = random_chain(200, rng);
  const CheckpointPlan plain = plan_checkpoints(chain, 1LL << 40);
  for (double share : {0.5, 0.33}) {
    const auto budget = static_cast<std::int64_t>(share * plain.unconstrained_peak_bytes);
    const CheckpointPlan plan = plan_checkpoints(chain, budget);
    ASSERT_TRUE(plan.feasible) << plan.message;
    EXPECT_LE(plan.predicted_peak_bytes, budget);
    EXPECT_GT(plan.recompute_ms, 0.0);
  }
}

TEST(CheckpointPlanner, EqualSegmentsLikeCheckpointSequential) {
  // 10 blocks in 4 segments: sizes 3, 3, 2, 2; the last stays plain.
  EXPECT_EQ(equal_segments(10, 4), (std::vector<CheckpointSegment>{{0, 3}, {3, 6}, {6, 8}}));
  EXPECT_EQ(sqrt_segments(16), (std::vector<CheckpointSegment>{{0, 4}, {4, 8}, {8, 12}}));
  EXPECT_TRUE(equal_segments(5, 1).empty());
  EXPECT_TRUE(sqrt_segments(0).empty());
}

TEST(CheckpointPlanner, AliasingBlocksMergeIntoTheirPredecessor) {
  // conv -> relu_ (in place) -> flatten (view) -> linear
  std::vector<ChainBlock> chain(4);
  chain[0] = {"conv", 50, 100, 0, 100, 400, 1.0};
  chain[1] = {"relu_", 0, 400, 400, 400, 400, 0.5, true};
  chain[2] = {"flatten", 0, 0, 0, 400, 400, 0.1, true};
  chain[3] = {"linear", 5, 400, 0, 400, 10, 2.0};
  const FusedChain fused = fuse_aliasing_blocks(chain);
  ASSERT_EQ(fused.blocks.size(), 2u);
  EXPECT_EQ(fused.blocks[0].name, "conv+relu_+flatten");
  EXPECT_EQ(fused.blocks[0].output_saved_bytes, 400);
  EXPECT_EQ(fused.blocks[0].output_bytes, 400);
  EXPECT_DOUBLE_EQ(fused.blocks[0].forward_ms, 1.6);
  EXPECT_EQ(fused.groups[0], (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(fused.groups[1], (std::vector<int>{3}));
  // The relu output is stored once: own 55 + x0 100 + x1 400.
  EXPECT_EQ(evaluate_plan(fused.blocks, {}).stored_bytes, 555);
  EXPECT_EQ(unfuse_segments(fused, {{0, 1}}), (std::vector<CheckpointSegment>{{0, 3}}));
  EXPECT_EQ(unfuse_segments(fused, {{1, 2}}), (std::vector<CheckpointSegment>{{3, 4}}));

  // A leading view merges into its successor.
  std::vector<ChainBlock> lead(2);
  lead[0] = {"view", 0, 0, 0, 100, 100, 0.1, true};
  lead[1] = {"linear", 5, 100, 0, 100, 10, 1.0};
  const FusedChain f2 = fuse_aliasing_blocks(lead);
  ASSERT_EQ(f2.blocks.size(), 1u);
  EXPECT_EQ(f2.groups[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(f2.blocks[0].input_saved_bytes, 100);
}

}  // namespace
}  // namespace fathom
