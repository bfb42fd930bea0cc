#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include "sample_report.h"

namespace fathom {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ReportTerminal, ShowsThroughputPhasesCopiesAndFindings) {
  const std::string t = format_terminal_report(test::sample_report());
  EXPECT_TRUE(has(t, "epoch 0")) << t;
  EXPECT_TRUE(has(t, "640.0 samples/s")) << t;
  EXPECT_TRUE(has(t, "80.00 ms mean")) << t;
  // forward: 300 ms over 10 steps = 30 ms a step, 30 % of the 80 ms step plus the 20 ms gap
  // before it; the rest of the step is "other", and the shares add up; device 28 ms.
  EXPECT_TRUE(has(t, "forward")) << t;
  EXPECT_TRUE(has(t, "30.00")) << t;
  EXPECT_TRUE(has(t, "30.0%")) << t;
  EXPECT_TRUE(has(t, "  other           -      50.00   50.0%")) << t;
  EXPECT_TRUE(has(t, "28.00")) << t;
  EXPECT_TRUE(has(t, "data*")) << t;
  EXPECT_TRUE(has(t, "pageable")) << t;
  EXPECT_TRUE(has(t, "10.0 MiB")) << t;
  EXPECT_TRUE(has(t, "[warning] Training waits on data loading")) << t;
  EXPECT_TRUE(has(t, "        line two")) << t;
}

TEST(ReportTerminal, SaysWhatWasNotMeasured) {
  const std::string t = format_terminal_report(test::sample_report());
  EXPECT_TRUE(has(t, "not measured: GPU kernels (CUPTI): CUPTI busy: another profiler holds it"))
      << t;
}

TEST(ReportTerminal, PhasesNeverRunAreLeftOut) {
  const std::string t = format_terminal_report(test::sample_report());
  EXPECT_FALSE(has(t, "optimizer")) << t;
}

TEST(ReportTerminal, EmptyReportAndBadEpoch) {
  EXPECT_TRUE(has(format_terminal_report(RunReport{}), "no epoch has ended"));
  EXPECT_TRUE(has(format_terminal_report(test::sample_report(), 5), "no epoch 5"));
}

}  // namespace
}  // namespace fathom
