#include <fathom/error.h>
#include <fathom/report_diff.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "golden_reports.h"

namespace fathom {
namespace {

const MetricChange* metric(const ReportDiff& d, const std::string& name) {
  for (const MetricChange& m : d.metrics)
    if (m.name == name) return &m;
  return nullptr;
}

RunReport run(double step_ms_total, double samples, std::vector<std::string> finding_ids) {
  RunReport r;
  r.run_name = "r";
  EpochSummary e;
  for (Phase p : kAllPhases) e.phases[static_cast<std::size_t>(p)].phase = p;
  e.steps = 10;
  e.samples = static_cast<std::int64_t>(samples);
  e.step_ms_total = step_ms_total;
  e.wall_ms = step_ms_total;
  auto& fwd = e.phases[static_cast<std::size_t>(Phase::Forward)];
  fwd.count = 10;
  fwd.wall_ms_total = step_ms_total / 2;
  for (const std::string& id : finding_ids) {
    Finding f;
    f.id = id;
    f.title = "title of " + id;
    f.severity = id == "b" ? Severity::Critical : Severity::Warning;
    e.findings.push_back(f);
  }
  r.epochs.push_back(e);
  return r;
}

TEST(ReportDiff, StepTimeThroughputAndPhases) {
  const ReportDiff d = diff_reports(run(1000, 640, {}), run(800, 640, {}));
  const MetricChange* step = metric(d, "step time, mean");
  ASSERT_NE(step, nullptr);
  EXPECT_DOUBLE_EQ(*step->a, 100);
  EXPECT_DOUBLE_EQ(*step->b, 80);
  EXPECT_DOUBLE_EQ(*step->relative(), -0.2);
  EXPECT_EQ(step->verdict(0.02), 1);
  const MetricChange* tput = metric(d, "throughput");
  EXPECT_NEAR(*tput->relative(), 0.25, 1e-12);  // 640 samples in 0.8 s instead of 1 s
  EXPECT_EQ(tput->verdict(0.02), 1);            // higher is better
  EXPECT_DOUBLE_EQ(*metric(d, "forward per step")->b, 40);
  EXPECT_EQ(metric(d, "backward per step"), nullptr);  // ran in neither
}

TEST(ReportDiff, SmallChangesAreNoise) {
  const ReportDiff d = diff_reports(run(1000, 640, {}), run(1010, 640, {}));
  EXPECT_EQ(metric(d, "step time, mean")->verdict(0.02), 0);
  EXPECT_EQ(metric(d, "step time, mean")->verdict(0.005), -1);
}

TEST(ReportDiff, FindingsAppearDisappearAndChangeSeverity) {
  RunReport a = run(1000, 640, {"a", "b"});
  RunReport b = run(1000, 640, {"b", "c"});
  b.epochs[0].findings[0].severity = Severity::Info;
  const ReportDiff d = diff_reports(a, b);
  ASSERT_EQ(d.findings.size(), 3u);
  int appeared = 0, gone = 0, changed = 0;
  for (const FindingChange& f : d.findings) {
    if (f.kind == FindingChange::Kind::Appeared) {
      EXPECT_EQ(f.id, "c");
      ++appeared;
    }
    if (f.kind == FindingChange::Kind::Disappeared) {
      EXPECT_EQ(f.id, "a");
      ++gone;
    }
    if (f.kind == FindingChange::Kind::SeverityChanged) {
      EXPECT_EQ(f.id, "b");
      EXPECT_EQ(f.severity_a, Severity::Critical);
      EXPECT_EQ(f.severity_b, Severity::Info);
      ++changed;
    }
  }
  EXPECT_EQ(appeared + gone + changed, 3);
  const std::string text = format_diff(d);
  EXPECT_NE(text.find("+ appeared  [warning] title of c  (c)"), std::string::npos) << text;
  EXPECT_NE(text.find("- gone      [warning] title of a  (a)"), std::string::npos) << text;
  EXPECT_NE(text.find("* severity  critical -> info"), std::string::npos) << text;
}

GpuSummary gpu(std::int64_t compute_ns, double tc_share, std::int64_t busy_ns) {
  GpuSummary g;
  g.gpu_activity = true;
  g.tensor_cores.kernel_ns = compute_ns;
  g.tensor_cores.share = tc_share;
  g.timeline.window_ns = 1'000'000;
  DeviceTimeline d;
  d.device = 0;
  d.busy_ns = busy_ns;
  d.busy_share = double(busy_ns) / 1e6;
  g.timeline.devices.push_back(d);
  return g;
}

// Two GPU sections: the report diff compares them when both epochs have one, and the analyses'
// diff (fathom diff of two `analyze --json`) is the same comparison.
TEST(ReportDiff, GpuSectionsAreCompared) {
  RunReport a = run(100, 640, {}), b = run(90, 640, {});
  a.epochs[0].gpu = gpu(800'000, 0.20, 900'000);
  b.epochs[0].gpu = gpu(600'000, 0.70, 700'000);
  const ReportDiff d = diff_reports(a, b);
  const MetricChange* tc = metric(d, "Tensor Core share of compute");
  ASSERT_NE(tc, nullptr);
  EXPECT_EQ(tc->section, "gpu");
  EXPECT_DOUBLE_EQ(*tc->a, 20.0);
  EXPECT_DOUBLE_EQ(*tc->b, 70.0);
  EXPECT_EQ(tc->verdict(0.02), 1) << "a higher Tensor Core share is better";
  const MetricChange* busy = metric(d, "device 0 busy");
  ASSERT_NE(busy, nullptr);
  EXPECT_EQ(busy->verdict(0.02), -1) << "less busy is worse";
  EXPECT_DOUBLE_EQ(*metric(d, "compute-kernel time")->b, 0.6);
  EXPECT_EQ(diff_gpu_summaries(*a.epochs[0].gpu, *b.epochs[0].gpu).size(),
            static_cast<std::size_t>(
                std::count_if(d.metrics.begin(), d.metrics.end(),
                              [](const MetricChange& m) { return m.section == "gpu"; })));
  // Without a GPU section on one side there is nothing to compare.
  b.epochs[0].gpu.reset();
  EXPECT_EQ(metric(diff_reports(a, b), "Tensor Core share of compute"), nullptr);
}

TEST(ReportDiff, MissingEpochNamesTheReport) {
  try {
    (void)diff_reports(run(1, 1, {}), run(1, 1, {}), 3, -1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("report A (r) has no epoch 3"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)diff_reports(RunReport{}, run(1, 1, {})), Error);
}

TEST(ReportDiff, RecordedRunsWithDifferentBatches) {
  const ReportDiff d = diff_reports(test::golden_report("cpu_cnn_batch16.report.json"),
                                    test::golden_report("cpu_cnn_batch64.report.json"));
  ASSERT_FALSE(d.environment_changes.empty());
  EXPECT_EQ(d.environment_changes.back(), "samples per step: 16 -> 64");
  const std::string text = format_diff(d);
  EXPECT_NE(text.find("step time, mean"), std::string::npos);
  EXPECT_NE(text.find("process peak resident"), std::string::npos);
  EXPECT_NE(text.find("no finding appeared or disappeared"), std::string::npos);
}

TEST(ReportDiff, TelemetryAndMemoryWhenMeasured) {
  RunReport a = test::golden_report("synthetic_h100.report.json");
  const ReportDiff d = diff_reports(a, a, 0, 1);
  EXPECT_DOUBLE_EQ(*metric(d, "GPU busy (NVML), mean")->a, 55);
  EXPECT_DOUBLE_EQ(*metric(d, "GPU busy (NVML), mean")->b, 56);
  EXPECT_EQ(metric(d, "GPU busy (NVML), mean")->verdict(0.01), 1);
  EXPECT_NE(metric(d, "device peak allocated"), nullptr);
  EXPECT_NE(metric(d, "energy per sample"), nullptr);
  EXPECT_NEAR(*metric(d, "energy per sample")->a, 10920.0 / 1600, 1e-9);
}

}  // namespace
}  // namespace fathom
