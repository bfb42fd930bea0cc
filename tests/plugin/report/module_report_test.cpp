#include <fathom/checkpoint_planner.h>
#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include "sample_report.h"

namespace fathom {
namespace {

RunReport with_modules() {
  RunReport r = test::sample_report();
  ModuleReport m;
  m.source = "saved-tensor hooks, deduplicated by storage";
  m.profiled_steps = 2;
  ModuleMeasurement conv;
  conv.chain = "features (Sequential)";
  conv.name = "features.0 (Conv2d)";
  conv.calls = 2;
  conv.saved_bytes = 4 << 20;
  conv.input_saved_bytes = 4 << 20;
  conv.input_bytes = 4 << 20;
  conv.output_bytes = 16 << 20;
  conv.forward_ms = 1.25;
  conv.forward_device_ms = 0.5;
  ModuleMeasurement relu = conv;
  relu.name = "features.1 (ReLU)";
  relu.saved_bytes = 16 << 20;
  relu.input_saved_bytes = 0;
  relu.output_saved_bytes = 16 << 20;
  relu.aliases_input = true;
  relu.forward_device_ms.reset();
  relu.checkpointed = true;
  m.modules = {conv, relu};
  CheckpointPlanReport p;
  p.chain = "features (Sequential)";
  p.budget = "80 % of device memory";
  p.budget_bytes = 10 << 20;
  p.unconstrained_peak_bytes = 20 << 20;
  p.predicted_peak_bytes = 9 << 20;
  p.min_feasible_budget_bytes = 5 << 20;
  p.forward_ms = 2.5;
  p.recompute_ms = 1.25;
  p.step_overhead = 0.05;
  p.predicted_stored_bytes = 8 << 20;
  p.measured_stored_bytes = 8 << 20;
  p.feasible = true;
  p.applied = true;
  p.segments = {{0, 2}};
  p.message = "checkpoint 2 of 2 blocks";
  p.code = "x = fathom::forward(features, x, plan);\n// second line";
  m.plans = {p};
  OutOfMemoryEvent o;
  o.step = 3;
  o.phase = Phase::Backward;
  o.module = "features.1 (ReLU)";
  o.peak_allocated_bytes = 70LL << 30;
  o.device_memory_bytes = 80LL << 30;
  o.error = "CUDA out of memory. Tried to allocate 2.00 GiB";
  o.retried = true;
  o.recovered = true;
  o.action = "freed gradients and cached blocks, checkpointed 2 of 2 blocks, retried the step";
  m.out_of_memory = {o};
  r.epochs[0].modules = m;
  return r;
}

TEST(ModuleReport, JsonRoundTripsEveryField) {
  const RunReport r = with_modules();
  const std::string text = format_json_report(r);
  const RunReport back = parse_json_report(text, "mem");
  EXPECT_EQ(format_json_report(back), text);
  ASSERT_TRUE(back.epochs.at(0).modules.has_value());
  const ModuleReport& m = *back.epochs[0].modules;
  ASSERT_EQ(m.modules.size(), 2u);
  EXPECT_EQ(m.modules[1].output_saved_bytes, 16 << 20);
  EXPECT_TRUE(m.modules[1].aliases_input);
  EXPECT_FALSE(m.modules[1].forward_device_ms.has_value());
  EXPECT_DOUBLE_EQ(*m.modules[0].forward_device_ms, 0.5);
  ASSERT_EQ(m.plans.size(), 1u);
  EXPECT_EQ(m.plans[0].segments, (std::vector<CheckpointSegment>{{0, 2}}));
  EXPECT_EQ(m.plans[0].code, "x = fathom::forward(features, x, plan);\n// second line");
  ASSERT_EQ(m.out_of_memory.size(), 1u);
  EXPECT_EQ(m.out_of_memory[0].phase, Phase::Backward);
  EXPECT_EQ(*m.out_of_memory[0].peak_allocated_bytes, 70LL << 30);
}

TEST(ModuleReport, AbsentSectionIsNull) {
  const std::string text = format_json_report(test::sample_report());
  EXPECT_NE(text.find("\"modules\": null"), std::string::npos);
  EXPECT_FALSE(parse_json_report(text, "mem").epochs.at(0).modules.has_value());
}

TEST(ModuleReport, TerminalListsModulesPlanAndOutOfMemory) {
  const std::string text = format_terminal_report(with_modules());
  for (const char* want :
       {"activations by module (2 profiled steps", "[features (Sequential)]", "features.0 (Conv2d)",
        "4.0 MiB", "16.0 MiB", "checkpointed", "checkpoint plan for features (Sequential) (applied",
        "20.0 MiB -> 9.0 MiB predicted", "50% of the forward, 5.0% of a step",
        "saved after the forward: 8.0 MiB predicted, 8.0 MiB measured",
        "    x = fathom::forward(features, x, plan);",
        "out of memory in step 3, backward phase, module features.1 (ReLU)",
        "peak allocated 70.00 GiB of 80.00 GiB", "(the retry succeeded)"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
}

}  // namespace
}  // namespace fathom
