// The checkpoint feature inside a session: per-module measurement, the report's section, Suggest
// and Auto modes, registered blocks.
#include <fathom/checkpoint_planner.h>
#include <fathom/fathom.h>
#include <gtest/gtest.h>

#include <cmath>

#include "gradient_steps.h"
#include "measure/saved_tensor_meter.h"
#include "session_fixture.h"

namespace fathom {
namespace {

using test::SessionTest;

torch::nn::Sequential chain_model() {
  torch::manual_seed(11);
  using namespace torch::nn;
  return Sequential(Linear(64, 256), ReLU(), Linear(256, 256), Tanh(), Dropout(0.1),
                    Linear(256, 256), ReLU(), Linear(256, 256), Sigmoid(), Linear(256, 10));
}

// One epoch of `steps` steps through fathom::forward.
void train(Session& session, torch::nn::Sequential& model, int steps, std::int64_t batch = 128) {
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  auto e = session.epoch();
  for (int s = 0; s < steps; ++s) {
    auto step = e.step(batch);
    const at::Tensor x = torch::randn({batch, 64});
    at::Tensor loss;
    {
      auto f = step.forward();
      loss = fathom::forward(model, x).pow(2).mean();
    }
    {
      auto b = step.backward();
      optimizer.zero_grad();
      loss.backward();
    }
    {
      auto o = step.optimizer();
      optimizer.step();
    }
  }
}

std::vector<ChainBlock> measured_chain(const ModuleReport& m) {
  std::vector<ChainBlock> chain;
  for (const ModuleMeasurement& x : m.modules) chain.push_back(chain_block(x));
  return chain;
}

TEST_F(SessionTest, MeasuresWhatEachModuleSavesForBackward) {
  ASSERT_TRUE(detail::SavedTensorCapture::available())
      << "fathom's autograd engine could not be installed";
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Observe));
  auto model = chain_model();
  session.watch(*model);
  train(session, model, 4);
  const EpochSummary& e = session.report().epochs.at(0);
  ASSERT_TRUE(e.modules.has_value());
  const ModuleReport& m = *e.modules;
  EXPECT_EQ(m.profiled_steps, 3);
  ASSERT_EQ(m.modules.size(), 10u);
  EXPECT_EQ(m.modules[0].name, "0 (Linear)");
  EXPECT_EQ(m.modules[0].chain, "Sequential");
  EXPECT_EQ(m.modules[0].calls, 3);
  const std::int64_t act = 128 * 256 * 4;  // one activation of the batch, fp32
  // Linear keeps its input (the data: 128 x 64), ReLU its output, Tanh and Sigmoid their outputs,
  // Dropout its mask (own bytes: a new storage) and nothing of its input.
  EXPECT_EQ(m.modules[0].input_saved_bytes, 128 * 64 * 4);
  EXPECT_EQ(m.modules[0].own_bytes, 0);
  EXPECT_EQ(m.modules[1].output_saved_bytes, act);
  EXPECT_EQ(m.modules[2].input_saved_bytes, act);
  EXPECT_EQ(m.modules[3].output_saved_bytes, act);
  EXPECT_GT(m.modules[4].own_bytes, 0);
  EXPECT_EQ(m.modules[4].input_saved_bytes, 0);
  for (const ModuleMeasurement& x : m.modules) {
    EXPECT_GT(x.forward_ms, 0.0) << x.name;
    EXPECT_FALSE(x.forward_device_ms.has_value());  // CPU
    EXPECT_FALSE(x.checkpointed);
  }
  // Observe mode: measurements, no plan.
  EXPECT_TRUE(m.plans.empty());
}

TEST_F(SessionTest, SavedBytesMatchThePlannersPredictionWithinFivePercent) {
  ASSERT_TRUE(detail::SavedTensorCapture::available());
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Observe));
  auto model = chain_model();
  session.watch(*model);
  train(session, model, 1);
  const std::vector<ChainBlock> chain = measured_chain(*session.report().epochs.at(0).modules);
  const FusedChain fused = fuse_aliasing_blocks(chain);
  const PlanCost plain = evaluate_plan(fused.blocks, {});
  const at::Tensor x = torch::randn({128, 64});
  {
    detail::SavedTensorCapture capture;
    const at::Tensor y = model->forward(x);
    EXPECT_NEAR(static_cast<double>(capture.total_bytes()), static_cast<double>(plain.stored_bytes),
                0.05 * static_cast<double>(plain.stored_bytes));
  }
  // Single-level checkpointing needs about 2 sqrt(n) activations at least: plan between that and
  // the unconstrained peak, and at it.
  const std::int64_t least = min_feasible_budget(fused.blocks);
  ASSERT_LT(least, plain.peak_bytes);
  for (std::int64_t budget : {(least + plain.peak_bytes) / 2, least}) {
    const CheckpointPlan plan = plan_checkpoints(fused.blocks, budget);
    ASSERT_TRUE(plan.feasible) << plan.message;
    ASSERT_FALSE(plan.segments.empty());
    detail::SavedTensorCapture capture;
    const at::Tensor y = fathom::forward(model, x, unfuse_segments(fused, plan.segments));
    const double measured = static_cast<double>(capture.total_bytes());
    EXPECT_NEAR(measured, static_cast<double>(plan.stored_bytes),
                0.05 * static_cast<double>(plan.stored_bytes))
        << "budget " << budget << ": " << plan.message;
    EXPECT_LT(measured, static_cast<double>(plain.stored_bytes));
  }
}

TEST_F(SessionTest, SuggestListsThePlanAndTheCodeUnderABudget) {
  Session session(Options()
                      .report_dir(dir())
                      .print_report(false)
                      .mode(Mode::Suggest)
                      .checkpoint_budget(MemoryBudget::fraction(0.6)));
  auto model = chain_model();
  session.watch(*model);
  train(session, model, 3);
  const EpochSummary& e = session.report().epochs.at(0);
  ASSERT_TRUE(e.modules.has_value());
  ASSERT_EQ(e.modules->plans.size(), 1u);
  const CheckpointPlanReport& p = e.modules->plans[0];
  EXPECT_FALSE(p.applied);
  EXPECT_TRUE(p.feasible) << p.message;
  EXPECT_LE(p.predicted_peak_bytes, p.budget_bytes);
  EXPECT_NEAR(static_cast<double>(p.budget_bytes),
              0.6 * static_cast<double>(p.unconstrained_peak_bytes),
              0.01 * static_cast<double>(p.unconstrained_peak_bytes));
  EXPECT_GT(p.recompute_ms, 0.0);
  ASSERT_TRUE(p.step_overhead.has_value());
  EXPECT_NE(p.code.find("fathom::forward(sequential, x, plan)"), std::string::npos) << p.code;
  EXPECT_NE(p.code.find("FATHOM_CHECKPOINT_BUDGET=60%"), std::string::npos) << p.code;
  bool finding = false;
  for (const Finding& f : e.findings)
    finding = finding || (f.id == "memory.activation_checkpointing" && !f.applied);
  EXPECT_TRUE(finding);
  // Nothing was applied: the later steps ran plainly.
  for (const ModuleMeasurement& x : e.modules->modules) EXPECT_FALSE(x.checkpointed);
}

TEST_F(SessionTest, NoBudgetOnCpuMeansNoPlan) {
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Auto));
  auto model = chain_model();
  session.watch(*model);
  train(session, model, 2);
  ASSERT_TRUE(session.report().epochs.at(0).modules.has_value());
  EXPECT_TRUE(session.report().epochs.at(0).modules->plans.empty());
}

TEST_F(SessionTest, AutoAppliesThePlanAndTheSavedBytesDropAsPredicted) {
  Session session(Options()
                      .report_dir(dir())
                      .print_report(false)
                      .mode(Mode::Auto)
                      .checkpoint_budget(MemoryBudget::fraction(0.5)));
  auto model = chain_model();
  session.watch(*model);
  train(session, model, 3);  // step 0 measures, steps 1 and 2 run (and measure) with the plan
  const EpochSummary& e = session.report().epochs.at(0);
  ASSERT_TRUE(e.modules.has_value());
  ASSERT_EQ(e.modules->plans.size(), 1u);
  const CheckpointPlanReport& p = e.modules->plans[0];
  EXPECT_TRUE(p.applied);
  ASSERT_TRUE(p.measured_stored_bytes.has_value());
  EXPECT_NEAR(static_cast<double>(*p.measured_stored_bytes),
              static_cast<double>(p.predicted_stored_bytes),
              0.05 * static_cast<double>(p.predicted_stored_bytes));
  int checkpointed = 0;
  for (const ModuleMeasurement& x : e.modules->modules) checkpointed += x.checkpointed ? 1 : 0;
  int planned = 0;
  for (const CheckpointSegment& s : p.segments) planned += s.end - s.begin;
  EXPECT_EQ(checkpointed, planned);
  EXPECT_GT(planned, 0);
  // The footprint (and the hardware fit's "as run" row) holds the activations as run, under the
  // plan, not the ones the chain would keep unchecked (issue 16).
  ASSERT_TRUE(e.footprint.has_value());
  EXPECT_TRUE(e.footprint->checkpointing);
  EXPECT_EQ(e.footprint->activation_bytes, p.predicted_stored_bytes);
  EXPECT_LT(e.footprint->activation_bytes, p.unconstrained_peak_bytes);
  // The next epoch keeps the plan.
  train(session, model, 1);
  ASSERT_TRUE(session.report().epochs.at(1).modules.has_value());
  ASSERT_EQ(session.report().epochs.at(1).modules->plans.size(), 1u);
  EXPECT_TRUE(session.report().epochs.at(1).modules->plans[0].applied);
}

struct LayerImpl : torch::nn::Cloneable<LayerImpl> {
  explicit LayerImpl(int width) : width(width) { reset(); }
  void reset() override { fc = register_module("fc", torch::nn::Linear(width, width)); }
  at::Tensor forward(const at::Tensor& x) { return torch::relu(fc->forward(x)) + x; }
  int width;
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Layer);

TEST_F(SessionTest, RegisteredBlocksFormAChainAutoCheckpointsOneByOne) {
  torch::manual_seed(12);
  std::vector<Layer> layers;
  torch::nn::ModuleList list;    // for the names in the report
  std::vector<Layer> reference;  // the same weights, run plainly
  for (int i = 0; i < 6; ++i) {
    layers.push_back(Layer(128));
    list->push_back(layers.back());
    reference.push_back(Layer(std::dynamic_pointer_cast<LayerImpl>(layers.back()->clone())));
  }
  Session session(Options()
                      .report_dir(dir())
                      .print_report(false)
                      .mode(Mode::Auto)
                      .checkpoint_budget(MemoryBudget::fraction(0.6)));
  session.watch(*list);
  const at::Tensor x = torch::randn({64, 128});
  {
    auto e = session.epoch();
    for (int s = 0; s < 2; ++s) {
      auto step = e.step(64);
      at::Tensor loss;
      {
        auto f = step.forward();
        at::Tensor h = x;
        for (Layer& l : layers) h = fathom::block(l, h);  // instead of l->forward(h)
        loss = h.pow(2).mean();
      }
      {
        auto b = step.backward();
        for (auto& p : list->parameters()) p.mutable_grad() = at::Tensor();
        loss.backward();
      }
    }
  }
  const EpochSummary& e = session.report().epochs.at(0);
  ASSERT_TRUE(e.modules.has_value());
  ASSERT_EQ(e.modules->modules.size(), 6u);
  EXPECT_EQ(e.modules->modules[0].chain, "blocks");
  EXPECT_EQ(e.modules->modules[0].name, "0 (Layer)");
  ASSERT_EQ(e.modules->plans.size(), 1u);
  const CheckpointPlanReport& p = e.modules->plans[0];
  EXPECT_TRUE(p.applied);
  int checkpointed = 0;
  for (const CheckpointSegment& s : p.segments) {
    EXPECT_EQ(s.end - s.begin, 1);  // registered blocks are checkpointed one by one
    ++checkpointed;
  }
  EXPECT_GT(checkpointed, 0);
  int flagged = 0;
  for (const ModuleMeasurement& m : e.modules->modules) flagged += m.checkpointed ? 1 : 0;
  EXPECT_EQ(flagged, checkpointed);
  // The second step ran with the plan; its gradients are those of the plain model, bit for bit.
  at::Tensor h = x;
  for (Layer& l : reference) h = l->forward(h);
  h.pow(2).mean().backward();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    EXPECT_TRUE(torch::equal(layers[i]->fc->weight.grad(), reference[i]->fc->weight.grad())) << i;
    EXPECT_TRUE(torch::equal(layers[i]->fc->bias.grad(), reference[i]->fc->bias.grad())) << i;
  }
}

// A transformer's shape: a model that runs its layers, a ModuleList, through fathom::block.
struct StackImpl : torch::nn::Module {
  explicit StackImpl(int n) {
    for (int i = 0; i < n; ++i) layers->push_back(Layer(64));
    register_module("layers", layers);
  }
  at::Tensor forward(at::Tensor x) {
    for (const auto& layer : *layers) x = fathom::block<LayerImpl>(layer, x);
    return x;
  }
  torch::nn::ModuleList layers;
};
TORCH_MODULE(Stack);

// Issue 24: inside fathom::forward(model, x) the model was the one block (its blocks nested in it
// were ranges only), so the planner had nothing to split. Its blocks are the chain now.
TEST_F(SessionTest, BlocksInsideAWrappedModelAreMeasuredAsBlocks) {
  torch::manual_seed(13);
  Stack model(4);
  Session session(Options().report_dir(dir()).print_report(false));
  session.watch(*model);
  const at::Tensor x = torch::randn({32, 64});
  test::run_gradient_steps(session, model, x, 3);
  const EpochSummary& e = session.report().epochs.at(0);
  ASSERT_TRUE(e.modules.has_value());
  ASSERT_EQ(e.modules->modules.size(), 4u);
  for (const ModuleMeasurement& m : e.modules->modules) {
    EXPECT_EQ(m.chain, "blocks");
    EXPECT_NE(m.name.find("layers."), std::string::npos) << m.name;
    EXPECT_GT(m.saved_bytes, 0) << m.name;
  }
  ASSERT_TRUE(e.footprint.has_value());
  EXPECT_EQ(e.footprint->checkpointable_blocks, 4);
}

}  // namespace
}  // namespace fathom
