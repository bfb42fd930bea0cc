// Reports that explain their gaps (issue 24, point 8): each reason said once, no GPU card sizes
// on a CPU run, throughput over the same steps as the step time, observe mode worded as
// observing. Each test failed on the code before.
#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "advisor_fixtures.h"
#include "analyze/fit_hardware.h"

namespace fathom {
namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

RunReport report_of(EpochSummary e, std::string device = "cuda:0", std::string mode = "suggest") {
  RunReport r;
  r.run_name = "r";
  r.environment.device = std::move(device);
  r.environment.mode = mode_from_name(mode);
  r.epochs.push_back(std::move(e));
  return r;
}

MemoryFootprint footprint() {
  MemoryFootprint m;
  m.parameter_count = 1000;
  m.parameter_bytes = 4000;
  m.gradient_bytes = 4000;
  m.optimizer_state_bytes = 8000;
  m.activation_bytes = 1 << 20;
  m.checkpointable_blocks = 4;
  return m;
}

std::string summary(const RunReport& r) {
  std::set<std::string> said;
  return format_terminal_summary(r, -1, said);
}

TEST(ReportGaps, AMissingActivationReasonIsSaidOnce) {
  EpochSummary e = test::epoch_with(100, 10);
  e.footprint = footprint();
  e.footprint->activation_bytes.reset();
  e.footprint->activation_why = "no model ran through fathom::forward or fathom::block";
  const RunReport r = report_of(std::move(e));
  const std::string why = r.epochs[0].footprint->activation_why;
  EXPECT_EQ(count(format_terminal_report(r), why), 1u) << format_terminal_report(r);
  EXPECT_EQ(count(format_html_report(r), why), 1u);
}

TEST(ReportGaps, ACpuRunHasNoGpuCardColumns) {
  EpochSummary e = test::epoch_with(100, 10);
  e.footprint = footprint();
  const std::string cpu = format_terminal_report(report_of(e, "cpu"));
  EXPECT_NE(cpu.find("hardware fit"), std::string::npos) << cpu;
  EXPECT_EQ(cpu.find("80 GB"), std::string::npos) << cpu;
  EXPECT_EQ(format_html_report(report_of(e, "cpu")).find("80 GB"), std::string::npos);
  // On a GPU the cards are the point of the table.
  EXPECT_NE(format_terminal_report(report_of(e, "cuda:0")).find("80 GB"), std::string::npos);
}

// One rule for every writer (epoch_hardware_fit): the JSON used to table the four GPU cards on a
// CPU run that the terminal and the HTML had dropped.
TEST(ReportGaps, TheJsonComparesCardsOnlyWhereTheTerminalDoes) {
  EpochSummary e = test::epoch_with(100, 10);
  e.footprint = footprint();
  for (const std::string device : {"cpu", "cuda:0"}) {
    const RunReport r = report_of(e, device);
    const bool gpu = device != "cpu";
    const std::string json = format_json_report(r);
    const std::string terminal = format_terminal_report(r);
    EXPECT_EQ(terminal.find("80 GB") != std::string::npos, gpu) << terminal;
    EXPECT_EQ(json.find("\"80 GB\"") != std::string::npos, gpu) << json;
    EXPECT_EQ(json.find("\"card_capacity_bytes\": null") != std::string::npos, !gpu) << json;
    EXPECT_EQ(json.find("\"cards\": null") != std::string::npos, !gpu) << json;
    // The needs are the same on both: only the comparison with GPU cards is left out.
    const auto need = hardware_fit(*e.footprint, std::nullopt, std::nullopt).variants[0].need_bytes;
    EXPECT_NE(json.find("\"need_bytes\": " + std::to_string(*need)), std::string::npos);
    // The journal (the live report) writes epochs through the same rule.
    EXPECT_EQ(
        format_journal_epoch(r.epochs[0], r.environment).find("\"80 GB\"") != std::string::npos,
        gpu);
  }
}

// 10 steps of 80 ms with 20 ms of loading between them, then a 2 s eval pass before the epoch
// ends: 640 samples in 1 s of training, not in the epoch's 3 s.
TEST(ReportGaps, SamplesPerSecondCoverTheStepsTheStepTimeCovers) {
  EpochSummary e = test::epoch_with(800, 200);
  e.samples = 640;
  e.wall_ms = 3000;
  EXPECT_DOUBLE_EQ(e.samples_per_second(), 640.0);
  const RunReport r = report_of(e);
  EXPECT_NE(summary(r).find("| 640.0 samples/s"), std::string::npos) << summary(r);
  EXPECT_NE(format_terminal_report(r).find("640.0 samples/s"), std::string::npos);
}

TEST(ReportGaps, ObserveModeSaysItObservesRatherThanThatNothingWasFound) {
  const RunReport r = report_of(test::epoch_with(100, 1), "cpu", "observe");
  for (const std::string& text : {summary(r), format_terminal_report(r), format_html_report(r)}) {
    EXPECT_EQ(text.find("above the thresholds"), std::string::npos) << text;
    EXPECT_NE(text.find("observe mode measures and does not advise"), std::string::npos) << text;
  }
  // Suggest mode checked the thresholds: it says so.
  EXPECT_NE(summary(report_of(test::epoch_with(100, 1))).find("none above the thresholds"),
            std::string::npos);
}

}  // namespace
}  // namespace fathom
