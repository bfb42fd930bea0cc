// The joint activation plan in the report: the per-module table (module_report.h), its JSON and
// terminal writers (activation_plan_writers.cpp), and the advisor's finding with the plan as its
// fix (advisor_activation_plan.cpp).
#include "analyze/activation_plan_report.h"

#include <fathom/activation_planner.h>
#include <fathom/error.h>
#include <fathom/module_report.h>
#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "activation_fixtures.h"
#include "advise/advisor.h"
#include "advisor_fixtures.h"
#include "sample_report.h"

namespace fathom {
namespace {

using test::evidence;
using test::find;

// Two MLP blocks whose plan at 700 B recomputes block0's matmul and GELU (activation_plan_test).
std::vector<ActivationUnit> two_blocks() {
  return {test::mlp_unit("blocks.0"), test::mlp_unit("blocks.1")};
}

ActivationPlanReport planned(std::int64_t budget) {
  const std::vector<ActivationUnit> units = two_blocks();
  ActivationPlanReport r = activation_plan_report("blocks", units, plan_activations(units, budget));
  r.budget = "64 % of the activations";
  return r;
}

TEST(ActivationPlanReport, PerModuleRowsComeFromThePlan) {
  const ActivationPlanReport r = planned(700);
  EXPECT_TRUE(r.feasible);
  EXPECT_EQ(r.budget_bytes, 700);
  EXPECT_EQ(r.unconstrained_peak_bytes, 1100);
  EXPECT_EQ(r.predicted_peak_bytes, 700);
  EXPECT_EQ(r.predicted_recompute_ms, 5.0);
  EXPECT_EQ(r.predicted_transfer_ms, 0.0);
  ASSERT_TRUE(r.recompute_flop_fraction.has_value());
  EXPECT_DOUBLE_EQ(*r.recompute_flop_fraction, 4200.0 / 16400.0);
  ASSERT_EQ(r.modules.size(), 2u);
  EXPECT_EQ(r.modules[0].name, "blocks.0");
  EXPECT_EQ(r.modules[0].kept_bytes, 100);
  EXPECT_EQ(r.modules[0].recomputed_bytes, 400);
  EXPECT_EQ(r.modules[0].recomputed, (std::vector<std::string>{"mm", "gelu"}));
  EXPECT_TRUE(r.modules[0].offloaded.empty());
  EXPECT_EQ(r.modules[0].predicted_extra_ms, 5.0);
  EXPECT_EQ(r.modules[0].predicted_peak_bytes, 600);
  EXPECT_EQ(r.modules[1].predicted_peak_bytes, 700);
  EXPECT_EQ(r.modules[1].recomputed_bytes, 0);
  EXPECT_FALSE(r.modules[1].measured_peak_bytes.has_value());
  // A plan reported against other units is a caller's mistake, said as such.
  std::vector<ActivationUnit> one = two_blocks();
  one.pop_back();
  EXPECT_THROW(activation_plan_report("blocks", one, plan_activations(two_blocks(), 700)), Error);
}

RunReport with_plan() {
  RunReport run = test::sample_report();
  ModuleReport m;
  m.source = "saved-tensor hooks";
  m.profiled_steps = 2;
  ActivationPlanReport p = planned(700);
  p.applied = true;
  p.measured_peak_bytes = 720;
  p.measured_extra_ms = 5.5;
  p.modules[0].measured_peak_bytes = 610;
  p.modules[0].measured_extra_ms = 5.25;
  p.code = "fathom::Options().activation_plan(...)";
  m.activation_plans = {p};
  run.epochs[0].modules = m;
  return run;
}

TEST(ActivationPlanReport, JsonRoundTripsEveryField) {
  const RunReport run = with_plan();
  const std::string text = format_json_report(run);
  EXPECT_NE(text.find("\"activation_plans\""), std::string::npos);
  const RunReport back = parse_json_report(text, "mem");
  EXPECT_EQ(format_json_report(back), text);
  const ModuleReport& m = *back.epochs.at(0).modules;
  ASSERT_EQ(m.activation_plans.size(), 1u);
  const ActivationPlanReport& p = m.activation_plans[0];
  EXPECT_EQ(p.chain, "blocks");
  EXPECT_EQ(*p.measured_peak_bytes, 720);
  EXPECT_DOUBLE_EQ(*p.measured_extra_ms, 5.5);
  EXPECT_TRUE(p.applied);
  ASSERT_EQ(p.modules.size(), 2u);
  EXPECT_EQ(p.modules[0].recomputed, (std::vector<std::string>{"mm", "gelu"}));
  EXPECT_EQ(*p.modules[0].measured_peak_bytes, 610);
  EXPECT_FALSE(p.modules[1].measured_extra_ms.has_value());
}

TEST(ActivationPlanReport, AReportWrittenBeforeJointPlansStillReads) {
  RunReport run = with_plan();
  run.epochs[0].modules->activation_plans.clear();
  std::string text = format_json_report(run);
  const std::string key = "\"activation_plans\": [],";
  const auto at = text.find(key);
  ASSERT_NE(at, std::string::npos) << text;
  text.erase(at, key.size());
  const RunReport back = parse_json_report(text, "old");
  ASSERT_TRUE(back.epochs.at(0).modules.has_value());
  EXPECT_TRUE(back.epochs[0].modules->activation_plans.empty());
}

TEST(ActivationPlanReport, TerminalShowsPredictedAgainstMeasuredPerModule) {
  const std::string text = format_terminal_report(with_plan());
  for (const char* want :
       {"activation plan for blocks (applied, budget 64 % of the activations: 700 B)",
        "activation peak 1.1 KiB -> 700 B predicted, 720 B measured",
        "extra per step 5.000 ms predicted (recompute 5.000 ms, 26% of the forward's FLOPs, "
        "exposed transfer 0.000 ms), 5.500 ms measured",
        "offloading: not measured (no host link bandwidth), so nothing is offloaded", "kept",
        "recomputed", "offloaded", "recompute mm, gelu", "610 B", "5.250", "keep all",
        "    fathom::Options().activation_plan(...)"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
}

TEST(ActivationPlanReport, SuggestModesFixIsThePlanWithItsMemoryAndTime) {
  EpochSummary e = test::epoch_with(1000, 0);
  e.modules = ModuleReport{};
  ActivationPlanReport p = planned(700);
  e.modules->activation_plans = {p};
  const auto f = find(advise(e, Environment{}), finding_id::kActivationPlan);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->id, "memory.activation_plan");
  EXPECT_EQ(f->severity, Severity::Warning);
  EXPECT_FALSE(f->applied);
  EXPECT_EQ(f->title, "Keep, recompute or offload the saved activations of blocks");
  EXPECT_EQ(evidence(*f, "predicted activation peak")->value, "700 B");
  EXPECT_EQ(evidence(*f, "extra per step")->value,
            "5.000 ms predicted (recompute 5.000 ms, exposed transfer 0.000 ms)");
  EXPECT_EQ(evidence(*f, "host link")->value, "not measured: nothing offloaded");
  EXPECT_EQ(evidence(*f, "recomputed FLOPs")->value, "26% of the forward's");
  EXPECT_EQ(f->estimated_gain, "400 B less activation memory for 5.000 ms a step");
  EXPECT_EQ(f->fix,
            "// activation plan for blocks: predicted peak 700 B (budget 700 B, 1.1 KiB with "
            "everything kept), extra 5.000 ms a step (recompute 5.000 ms, exposed transfer "
            "0.000 ms)\n"
            "//   blocks.0: recompute mm, gelu\n"
            "// nothing offloaded: the host link's bandwidth was not measured\n"
            "// let fathom apply it: FATHOM_MODE=auto");
  // In Python: the same plan lines, then PyTorch's selective checkpointing and save_on_cpu.
  Environment python;
  python.language = LoopLanguage::Python;
  const auto py = find(advise(e, python), finding_id::kActivationPlan);
  ASSERT_TRUE(py);
  EXPECT_EQ(py->fix.rfind("# activation plan for blocks: predicted peak 700 B", 0), 0u) << py->fix;
  EXPECT_NE(py->fix.find("#   blocks.0: recompute mm, gelu\n"), std::string::npos) << py->fix;
  EXPECT_NE(py->fix.find("create_selective_checkpoint_contexts"), std::string::npos);
  EXPECT_NE(py->fix.find("save_on_cpu"), std::string::npos);
  EXPECT_EQ(py->fix.find("FATHOM_MODE"), std::string::npos) << py->fix;
}

TEST(ActivationPlanReport, ABudgetNoPlanMeetsIsCriticalAndSaysWhatFits) {
  EpochSummary e = test::epoch_with(1000, 0);
  e.modules = ModuleReport{};
  e.modules->activation_plans = {planned(600)};
  const auto f = find(advise(e, Environment{}), finding_id::kActivationPlan);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::Critical);
  EXPECT_EQ(evidence(*f, "least budget any plan fits")->value, "700 B");
  EXPECT_NE(f->why.find("raise the budget"), std::string::npos) << f->why;
  // Applied by Auto: info, and said so.
  e.modules->activation_plans[0] = planned(700);
  e.modules->activation_plans[0].applied = true;
  const auto applied = find(advise(e, Environment{}), finding_id::kActivationPlan);
  ASSERT_TRUE(applied);
  EXPECT_EQ(applied->severity, Severity::Info);
  EXPECT_EQ(applied->title, "fathom keeps, recomputes or offloads the saved activations of blocks");
  e.modules->activation_plans.clear();
  EXPECT_FALSE(find(advise(e, Environment{}), finding_id::kActivationPlan));
}

}  // namespace
}  // namespace fathom
