// The joint activation plan from a live session (issue 26, item 4): each block's op groups
// measured in the profiled steps, the plan Suggest reports and the one Auto runs, on a CPU.
#include <fathom/activation_planner.h>
#include <fathom/checkpoint_planner.h>
#include <fathom/fathom.h>
#include <gtest/gtest.h>

#include "checkpoint/activation_applier.h"
#include "checkpoint/unit_measure.h"
#include "gradient_steps.h"
#include "measure/saved_tensor_meter.h"
#include "session_fixture.h"

namespace fathom {
namespace {

using test::SessionTest;

constexpr std::int64_t kBatch = 32, kWidth = 64, kHidden = 256;
constexpr std::int64_t kHiddenBytes = kBatch * kHidden * 4;  // one fp32 activation inside a block
constexpr std::int64_t kWidthBytes = kBatch * kWidth * 4;    // a block's input

// An MLP block: fc1 saves its input, GELU its input (fc1's output), fc2 its input (GELU's).
struct MlpImpl : torch::nn::Cloneable<MlpImpl> {
  MlpImpl() { reset(); }
  void reset() override {
    fc1 = register_module("fc1", torch::nn::Linear(kWidth, kHidden));
    fc2 = register_module("fc2", torch::nn::Linear(kHidden, kWidth));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(torch::gelu(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

torch::nn::Sequential mlp_chain(int blocks) {
  torch::manual_seed(26);
  torch::nn::Sequential s;
  for (int i = 0; i < blocks; ++i) s->push_back(Mlp());
  return s;
}

const ActivationPlanReport& only_plan(const Session& session) {
  const EpochSummary& e = session.report().epochs.at(0);
  EXPECT_TRUE(e.modules.has_value());
  EXPECT_EQ(e.modules->activation_plans.size(), 1u);
  return e.modules->activation_plans.at(0);
}

TEST(UnitMeasure, GroupsAnMlpBlockByTheTensorsBackwardSaves) {
  ASSERT_TRUE(detail::SavedTensorCapture::available());
  torch::manual_seed(1);
  Mlp block;
  const at::Tensor x = torch::randn({kBatch, kWidth});
  detail::SavedTensorCapture independent;  // what autograd saves, counted on its own
  detail::MeasuredUnit m;
  {
    detail::UnitRecorder recorder;
    const at::Tensor y = block->forward(x);
    m = recorder.finish(x, {});
  }
  const ActivationUnit& u = m.unit;
  ASSERT_EQ(u.groups.size(), 3u);
  EXPECT_EQ(u.input_saved_bytes, kWidthBytes);
  // Linear runs as weight.t() and addmm (aten::linear is not observed): the view joins the group
  // of the product that reads it, named after the op whose output is saved.
  EXPECT_EQ(u.groups[0].name, "addmm");
  EXPECT_EQ(u.groups[1].name, "gelu");
  EXPECT_EQ(u.groups[2].name, "addmm#2");
  EXPECT_EQ(u.groups[0].saved_bytes, kHiddenBytes);  // saved by GELU
  EXPECT_EQ(u.groups[1].saved_bytes, kHiddenBytes);  // saved by fc2
  EXPECT_EQ(u.groups[2].saved_bytes, 0);             // the block's output: the next one's input
  EXPECT_TRUE(u.groups[0].expensive);
  EXPECT_FALSE(u.groups[1].expensive);
  EXPECT_TRUE(u.groups[2].expensive);
  EXPECT_EQ(u.groups[0].flops, 2.0 * kBatch * kWidth * kHidden);
  EXPECT_EQ(u.groups[1].flops, 0.0);
  EXPECT_EQ(u.groups[2].flops, 2.0 * kBatch * kHidden * kWidth);
  EXPECT_EQ(u.groups[0].inputs, std::vector<int>{kUnitInput});
  EXPECT_EQ(u.groups[1].inputs, std::vector<int>{0});
  EXPECT_EQ(u.groups[2].inputs, std::vector<int>{1});
  std::int64_t grouped = u.input_saved_bytes;
  for (const SavedGroup& g : u.groups) grouped += g.saved_bytes;
  EXPECT_EQ(grouped, independent.total_bytes());
  EXPECT_EQ(m.ops, 5);
  EXPECT_EQ(m.group_ops, (std::vector<std::vector<int>>{{0, 1}, {2}, {3, 4}}));
  // The product, not the view before it, makes the first group's saved storage; the last product
  // makes the block's output.
  EXPECT_EQ(m.group_producer, (std::vector<int>{1, 2, 4}));
}

TEST(ActivationApplier, MixedUnitsRunWholeKeptWhereThatFitsElseRecomputed) {
  // Three MLP-like units, sizes as the planner's fixture; the plan keeps part of units 0 and 1.
  std::vector<ActivationUnit> units;
  for (const char* name : {"a", "b", "c"}) {
    ActivationUnit u;
    u.name = name;
    u.input_bytes = u.input_saved_bytes = u.output_bytes = 100;
    u.groups = {{"mm", 200, 4.0, 4000, true, {kUnitInput}},
                {"gelu", 200, 1.0, 200, false, {0}},
                {"mm2", 100, 4.0, 4000, true, {1}}};
    units.push_back(u);
  }
  using TC = TensorChoice;
  ActivationPlan plan;
  plan.assignment.choices = {{TC::Keep, TC::Recompute, TC::Keep},
                             {TC::Keep, TC::Recompute, TC::Keep},
                             {TC::Recompute, TC::Recompute, TC::Recompute}};
  const std::vector<std::vector<int>> producers(3, {0, 1, 2});
  const auto actions = detail::unit_actions(units, plan.assignment, producers);
  ASSERT_EQ(actions.size(), 3u);
  EXPECT_EQ(actions[0].kind, detail::UnitActionKind::Mixed);
  EXPECT_EQ(actions[0].kept_op_positions, (std::vector<int>{0, 2}));
  EXPECT_EQ(actions[2].kind, detail::UnitActionKind::Recompute);
  // Keeping a group that saves nothing is no keep: that unit is recomputed whole.
  {
    std::vector<ActivationUnit> last_saves_nothing = units;
    last_saves_nothing[0].groups[2].saved_bytes = 0;
    ActivationAssignment a;
    a.choices = {{TC::Recompute, TC::Recompute, TC::Keep}};
    EXPECT_EQ(detail::unit_actions(last_saves_nothing, a, producers)[0].kind,
              detail::UnitActionKind::Recompute);
    EXPECT_EQ(detail::unit_actions(units, a, producers)[0].kind, detail::UnitActionKind::Mixed);
  }
  // A budget that holds one unit kept whole but not two: the first is kept, the second recomputed.
  const ActivationPlanOptions options;
  ActivationAssignment one_kept;
  one_kept.choices = {std::vector<TC>(3, TC::Keep), std::vector<TC>(3, TC::Recompute),
                      std::vector<TC>(3, TC::Recompute)};
  one_kept.segments = {{1, 2}, {2, 3}};
  plan.budget_bytes = evaluate_activations(units, one_kept, options).peak_bytes;
  const detail::WholeUnitPlan w = detail::apply_whole_units(units, plan, actions, options);
  EXPECT_TRUE(w.fits);
  EXPECT_EQ(w.kept_whole, std::vector<int>{0});
  EXPECT_EQ(w.recomputed_whole, std::vector<int>{1});
  ASSERT_EQ(w.assignment.segments.size(), 2u);
  EXPECT_EQ(w.assignment.segments[0].begin, 1);
  EXPECT_EQ(w.assignment.segments[1].begin, 2);
  EXPECT_NE(w.message.find("recomputed b; kept a"), std::string::npos) << w.message;
}

// A unit's offloaded tensors come back ahead during the backwards of the units after it, down
// to the next one that offloads (whose backward starts the copy): they may take what the budget
// leaves free at the fullest of those.
TEST(ActivationApplier, APrefetchTakesWhatTheBudgetLeavesFreeUntilItsUnitsBackward) {
  using detail::UnitAction;
  using detail::UnitActionKind;
  ActivationPlan plan;
  plan.budget_bytes = 100;
  for (std::int64_t peak : {50, 70, 90, 60, 120}) {
    UnitActivationCost u;
    u.peak_bytes = peak;
    plan.cost.units.push_back(u);
  }
  UnitAction offloading;
  offloading.kind = UnitActionKind::Mixed;
  offloading.offloaded_op_positions = {1};
  UnitAction input_only = offloading;
  input_only.offloaded_op_positions.clear();
  input_only.offloads_input = true;
  const std::vector<UnitAction> actions = {offloading, UnitAction{}, offloading, input_only,
                                           offloading};
  // Unit 0's tensors start back at unit 2's backward and stay through unit 1's: 100 - 90.
  EXPECT_EQ(detail::prefetch_ahead_bytes(plan, actions, 0), 10);
  EXPECT_EQ(detail::prefetch_ahead_bytes(plan, actions, 2), 40);  // unit 3 offloads its input
  EXPECT_EQ(detail::prefetch_ahead_bytes(plan, actions, 3), 0);   // unit 4 is over the budget
  EXPECT_EQ(detail::prefetch_ahead_bytes(plan, actions, 4), -1);  // nothing after it offloads
}

TEST_F(SessionTest, SuggestReportsTheJointPlanOfTheMeasuredGroups) {
  ASSERT_TRUE(detail::SavedTensorCapture::available());
  Session session(Options()
                      .report_dir(dir())
                      .print_report(false)
                      .mode(Mode::Suggest)
                      .checkpoint_budget(MemoryBudget::fraction(0.5)));
  auto model = mlp_chain(4);
  session.watch(*model);
  const at::Tensor x = torch::randn({kBatch, kWidth});
  test::run_gradient_steps(session, model, x, 3);
  const ActivationPlanReport& p = only_plan(session);
  const EpochSummary& e = session.report().epochs.at(0);
  EXPECT_FALSE(p.applied);
  EXPECT_TRUE(p.feasible) << p.message;
  EXPECT_LE(p.predicted_peak_bytes, p.budget_bytes);
  EXPECT_LT(p.predicted_peak_bytes, p.unconstrained_peak_bytes);
  // The block plan's budget: half its unconstrained peak.
  ASSERT_EQ(e.modules->plans.size(), 1u);
  EXPECT_EQ(p.budget_bytes, e.modules->plans[0].budget_bytes);
  // Each unit's groups hold what the block saves besides its input, counted on its own here.
  ASSERT_EQ(p.modules.size(), 4u);
  at::Tensor h = x;
  for (std::size_t i = 0; i < 4; ++i) {
    detail::SavedTensorCapture independent;
    const detail::SavedTensorCapture::Saved in = detail::storage_of(h);
    h = model->ptr<MlpImpl>(i)->forward(h);
    std::int64_t besides_input = 0;
    for (const auto& s : independent.saved())
      if (s.storage != in.storage) besides_input += s.bytes;
    const ActivationModuleRow& row = p.modules[i];
    EXPECT_EQ(row.kept_bytes + row.recomputed_bytes + row.offloaded_bytes, besides_input) << i;
    EXPECT_EQ(besides_input, 2 * kHiddenBytes);
    EXPECT_EQ(row.offloaded_bytes, 0);  // no link on a CPU
  }
  EXPECT_EQ(p.link_bytes_per_second, 0.0);
  EXPECT_NE(p.message.find("nothing offloaded"), std::string::npos) << p.message;
  ASSERT_TRUE(p.recompute_flop_fraction.has_value());
  EXPECT_GE(*p.recompute_flop_fraction, 0.0);
  EXPECT_LE(*p.recompute_flop_fraction, 1.0);
  // The finding prints the plan with its predicted memory and time.
  const Finding* f = nullptr;
  for (const Finding& x : e.findings)
    if (x.id == "memory.activation_plan") f = &x;
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->applied);
  EXPECT_NE(f->fix.find("predicted peak"), std::string::npos) << f->fix;
  EXPECT_NE(f->fix.find("extra"), std::string::npos) << f->fix;
  // Nothing ran checkpointed.
  for (const ModuleMeasurement& m : e.modules->modules) EXPECT_FALSE(m.checkpointed);
}

TEST_F(SessionTest, AutoRunsTheJointPlanWithTheSameGradients) {
  ASSERT_TRUE(detail::SavedTensorCapture::available());
  Session session(Options()
                      .report_dir(dir())
                      .print_report(false)
                      .mode(Mode::Auto)
                      .checkpoint_budget(MemoryBudget::fraction(0.5)));
  auto model = mlp_chain(4);
  auto reference = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(model->clone());
  session.watch(*model);
  const at::Tensor x = torch::randn({kBatch, kWidth});
  test::run_gradient_steps(session, model, x, 3);  // step 0 measures, steps 1 and 2 run the plan
  const ActivationPlanReport& p = only_plan(session);
  const EpochSummary& e = session.report().epochs.at(0);
  EXPECT_TRUE(p.applied) << p.message;
  EXPECT_TRUE(p.feasible) << p.message;
  EXPECT_LE(p.predicted_peak_bytes, p.budget_bytes);
  ASSERT_TRUE(p.measured_peak_bytes.has_value());
  EXPECT_LE(*p.measured_peak_bytes, p.budget_bytes);
  EXPECT_NEAR(static_cast<double>(*p.measured_peak_bytes),
              static_cast<double>(p.predicted_stored_bytes),
              0.05 * static_cast<double>(p.predicted_stored_bytes));
  // Steps 1 and 2 recomputed the checkpointed units in backward: that host time, per step.
  ASSERT_TRUE(p.measured_extra_ms.has_value());
  EXPECT_GT(*p.measured_extra_ms, 0.0);
  int checkpointed = 0;
  for (const ModuleMeasurement& m : e.modules->modules) checkpointed += m.checkpointed ? 1 : 0;
  // Every unit that recomputes anything runs as a checkpoint: whole, or kept in part (selective).
  int recomputed = 0, in_part = 0;
  for (const ActivationModuleRow& row : p.modules) {
    recomputed += row.recomputed_bytes > 0 ? 1 : 0;
    in_part += row.recomputed_bytes > 0 && row.kept_bytes > 0 ? 1 : 0;
  }
  EXPECT_GT(checkpointed, 0);
  EXPECT_EQ(checkpointed, recomputed);
  EXPECT_GT(in_part, 0) << "the plan keeps the products of some units and recomputes the rest";
  EXPECT_EQ(p.message.find("run whole"), std::string::npos) << p.message;
  // The block plan's report is that of the same segments.
  ASSERT_EQ(e.modules->plans.size(), 1u);
  EXPECT_TRUE(e.modules->plans[0].applied);
  bool finding = false;
  for (const Finding& f : e.findings)
    finding = finding || (f.id == "memory.activation_plan" && f.applied);
  EXPECT_TRUE(finding);
  // The last step ran with the plan: its gradients are the plain model's, bit for bit.
  reference->forward(x).pow(2).mean().backward();
  const auto got = model->parameters(), want = reference->parameters();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(torch::equal(got[i].grad(), want[i].grad())) << i;
}

// In-place items alias their input: each joins the unit before it, as for the block plan, and its
// groups follow that unit's.
TEST_F(SessionTest, InPlaceItemsJoinTheUnitBeforeThem) {
  ASSERT_TRUE(detail::SavedTensorCapture::available());
  torch::manual_seed(27);
  using namespace torch::nn;
  Sequential model(Linear(kWidth, kHidden), ReLU(ReLUOptions().inplace(true)),
                   Linear(kHidden, kHidden), ReLU(ReLUOptions().inplace(true)),
                   Linear(kHidden, kWidth));
  // Three units hold at least half their peak: 60 %.
  Session session(Options()
                      .report_dir(dir())
                      .print_report(false)
                      .mode(Mode::Suggest)
                      .checkpoint_budget(MemoryBudget::fraction(0.6)));
  session.watch(*model);
  const at::Tensor x = torch::randn({kBatch, kWidth});
  test::run_gradient_steps(session, model, x, 3);
  const ActivationPlanReport& p = only_plan(session);
  ASSERT_EQ(p.modules.size(), 3u);  // Linear + ReLU, Linear + ReLU, Linear
  // Each unit holds what its items save besides the unit's input, counted on its own here.
  const std::vector<std::pair<int, int>> items{{0, 2}, {2, 4}, {4, 5}};
  at::Tensor h = x;
  for (std::size_t u = 0; u < items.size(); ++u) {
    detail::SavedTensorCapture independent;
    const auto in = detail::storage_of(h).storage;
    for (int i = items[u].first; i < items[u].second; ++i)
      h = model[static_cast<std::size_t>(i)]->as<Linear>()
              ? model->ptr<LinearImpl>(static_cast<std::size_t>(i))->forward(h)
              : model->ptr<ReLUImpl>(static_cast<std::size_t>(i))->forward(h);
    std::int64_t besides_input = 0;
    for (const auto& s : independent.saved())
      if (s.storage != in) besides_input += s.bytes;
    const ActivationModuleRow& row = p.modules[u];
    EXPECT_EQ(row.kept_bytes + row.recomputed_bytes + row.offloaded_bytes, besides_input)
        << row.name;
  }
  EXPECT_TRUE(p.feasible) << p.message;
  EXPECT_LE(p.predicted_peak_bytes, p.budget_bytes);
}

TEST_F(SessionTest, ABudgetNoPlanMeetsGetsTheLeastMemoryPlanAndTheBudgetThatFits) {
  ASSERT_TRUE(detail::SavedTensorCapture::available());
  Session session(Options()
                      .report_dir(dir())
                      .print_report(false)
                      .mode(Mode::Suggest)
                      .checkpoint_budget(MemoryBudget::fraction(0.02)));
  auto model = mlp_chain(4);
  session.watch(*model);
  test::run_gradient_steps(session, model, torch::randn({kBatch, kWidth}), 3);
  const ActivationPlanReport& p = only_plan(session);
  EXPECT_FALSE(p.feasible);
  EXPECT_GT(p.min_feasible_budget_bytes, p.budget_bytes);
  EXPECT_LE(p.predicted_peak_bytes, p.min_feasible_budget_bytes);
  EXPECT_NE(p.message.find(std::to_string(p.min_feasible_budget_bytes)), std::string::npos)
      << p.message;
  const Finding* f = nullptr;
  for (const Finding& x : session.report().epochs.at(0).findings)
    if (x.id == "memory.activation_plan") f = &x;
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::Critical);
}

}  // namespace
}  // namespace fathom
