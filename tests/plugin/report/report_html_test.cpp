#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include <regex>

#include "advise/advisor.h"
#include "golden_reports.h"
#include "gpu_summary_fixture.h"
#include "report/report_html_parts.h"

namespace fathom {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
  return n;
}

RunReport synthetic() {
  RunReport r = test::golden_report("synthetic_h100.report.json");
  for (EpochSummary& e : r.epochs) e.findings = advise(e, r.environment);
  return r;
}

TEST(ReportHtml, IsOneSelfContainedPage) {
  const std::string h = format_html_report(synthetic());
  EXPECT_EQ(h.rfind("<!doctype html>", 0), 0u);
  EXPECT_TRUE(has(h, "</html>"));
  // Nothing to fetch: no external script, style, image or font, and a policy that forbids it.
  EXPECT_FALSE(has(h, "src=")) << "no external resource";
  EXPECT_FALSE(has(h, "<link"));
  EXPECT_FALSE(has(h, "url("));
  EXPECT_FALSE(has(h, "@import"));
  std::regex url(R"(https?://)");
  for (auto it = std::sregex_iterator(h.begin(), h.end(), url); it != std::sregex_iterator(); ++it)
    EXPECT_EQ(h.compare(it->position(), 26, "http://www.w3.org/2000/svg"), 0)
        << h.substr(it->position(), 60);
  EXPECT_TRUE(has(h, "Content-Security-Policy"));
  EXPECT_EQ(count(h, "<script>"), 1u);
  EXPECT_EQ(count(h, "<style>"), 1u);
}

TEST(ReportHtml, ChartsFromMeasurementsAndNotMeasuredWithTheReason) {
  const std::string h = format_html_report(synthetic());
  // Run level: step time by phase and memory per phase. Per epoch (2): transfer bandwidth against
  // the peak (NVML traffic) and busy over time (NVML utilization). Tensor Cores: not measured.
  EXPECT_EQ(count(h, "<svg class=\"chart\""), 6u);
  EXPECT_TRUE(has(h, "<figcaption>Step time by phase</figcaption>"));
  EXPECT_TRUE(has(h, "<figcaption>Memory per phase across epochs</figcaption>"));
  EXPECT_TRUE(has(h, "<figcaption>Transfer bandwidth against the link&#39;s peak</figcaption>"));
  EXPECT_TRUE(has(h, "<figcaption>GPU busy and idle</figcaption>"));
  EXPECT_EQ(
      count(h,
            "class=\"not-measured-text\">not measured: GPU kernels, transfers and Tensor Core use "
            "(CUPTI): synthetic report: no GPU activity records"),
      2u);
  // Bar tooltips carry the numbers: forward 2100 ms over 50 steps.
  EXPECT_TRUE(has(h, "<title>epoch 0: forward 42.0 ms per step</title>")) << h.substr(0, 0);
  // The link peak (gen 4 x16: 31.5 GB/s) is drawn as a marker line.
  EXPECT_TRUE(has(h, "<title>link peak: 31.5 GB/s</title>"));
}

// Issue 24: the run-wide charts drew a bar per epoch, so a 10,000-epoch run's end built 60,000
// rects (about 30 MiB of SVG) with 10,000 overlapping axis labels. They draw runs of epochs now.
TEST(ReportHtml, ALongRunsChartsDrawAFixedNumberOfBars) {
  RunReport r = synthetic();
  const EpochSummary first = r.epochs.at(0);
  r.epochs.clear();
  for (int i = 0; i < 2000; ++i) {
    EpochSummary e = first;
    e.index = i;
    e.findings.clear();
    r.epochs.push_back(e);
  }
  const std::string h = format_html_report(r);
  const std::size_t from = h.find("<figcaption>Step time by phase</figcaption>");
  ASSERT_NE(from, std::string::npos);
  const std::string chart = h.substr(from, h.find("</figure>", from) - from);
  // Each bar: a rect per phase and one for the time outside any phase.
  EXPECT_LE(count(chart, "<rect "), html_report::kMaxEpochBars * (kPhaseCount + 1)) << chart.size();
  EXPECT_LE(count(chart, "class=\"tick\""), 12u + 8u);  // the dozen category labels and the y axis
  // 2,000 epochs in bars of 17: the last bar holds the 11 left.
  EXPECT_TRUE(has(chart, "<title>epochs 0-16: forward 42.0 ms per step</title>"))
      << chart.substr(0, 2000);
  EXPECT_TRUE(has(chart, "<title>epochs 1989-1999: forward 42.0 ms per step</title>"));
  EXPECT_TRUE(
      has(chart, "The run&#39;s 2000 epochs are drawn as 118 bars of up to 17 consecutive"));
}

// A bar of several epochs is their mean per step (weighted by steps) and their highest peaks.
TEST(ReportHtml, EpochBarsMergeStepsAndPeaks) {
  using html_report::EpochDigest;
  std::vector<EpochDigest> run(5);
  for (int i = 0; i < 5; ++i) {
    EpochDigest& d = run[i];
    d.index = d.last_index = i;
    d.steps = i + 1;
    d.step_ms_total = 10.0 * (i + 1) * (i + 1);  // epoch i: 10 (i + 1) ms a step
    d.step_ms_mean = d.step_ms_total / d.steps;
    d.step_ms_max = 10.0 * (i + 1);
    d.phases[2].count = d.steps;
    d.phases[2].wall_ms_total = d.step_ms_total / 2;
    if (i != 1) d.phases[2].peak_allocated_bytes = 100 * (5 - i);
  }
  EXPECT_EQ(html_report::epoch_bars(run, 5).size(), 5u);
  const std::vector<EpochDigest> bars = html_report::epoch_bars(run, 2);
  ASSERT_EQ(bars.size(), 2u);  // epochs 0-2 and 3-4
  EXPECT_EQ(bars[0].index, 0);
  EXPECT_EQ(bars[0].last_index, 2);
  EXPECT_EQ(bars[1].index, 3);
  EXPECT_EQ(bars[1].last_index, 4);
  EXPECT_EQ(bars[0].steps, 6);
  EXPECT_DOUBLE_EQ(bars[0].step_ms_mean, (10.0 + 40 + 90) / 6);
  EXPECT_DOUBLE_EQ(bars[1].step_ms_max, 50.0);
  EXPECT_DOUBLE_EQ(bars[1].phases[2].wall_ms_total, (160.0 + 250) / 2);
  EXPECT_EQ(bars[0].phases[2].peak_allocated_bytes, 500);
  EXPECT_EQ(bars[1].phases[2].peak_allocated_bytes, 200);
}

TEST(ReportHtml, CpuRunSaysWhatWasNotMeasured) {
  const std::string h = format_html_report(test::golden_report("cpu_cnn_batch16.report.json"));
  EXPECT_TRUE(
      has(h, "not measured: GPU kernels, transfers and Tensor Core use (CUPTI): no CUDA device"));
  EXPECT_TRUE(has(h, "Process resident memory (CPU)"));
  EXPECT_EQ(count(h, "<svg class=\"chart\""), 2u);         // step time, memory (RSS)
  EXPECT_EQ(count(h, "class=\"not-measured-text\""), 6u);  // 3 per epoch
}

// Which reason a chart gives is chosen by the entry's id, not by words in its `what`.
TEST(ReportHtml, AChartsReasonIsFoundByItsIdNotItsWording) {
  RunReport r = test::golden_report("cpu_cnn_batch16.report.json");
  for (Unmeasured& u : r.environment.not_measured)
    if (u.id == UnmeasuredId::GpuActivity) u.what = "kernel records";  // no "CUPTI" left
  const std::string h = format_html_report(r);
  EXPECT_TRUE(has(h, "not measured: kernel records: no CUDA device")) << "the id finds it";
  Unmeasured decoy{"CUPTI and NVML and device memory", "a decoy"};  // id Other
  r.environment.not_measured.insert(r.environment.not_measured.begin(), decoy);
  const std::string with_decoy = format_html_report(r);
  EXPECT_TRUE(has(with_decoy, "not measured: kernel records: no CUDA device"));
  EXPECT_FALSE(has(with_decoy, "not-measured-text\">not measured: CUPTI and NVML"))
      << "words alone choose no chart's reason";
}

TEST(ReportHtml, TopFindingsComeFirstWithEvidenceAndFix) {
  const std::string h = format_html_report(synthetic());
  const auto top = h.find("Top findings (epoch 1)");
  ASSERT_NE(top, std::string::npos);
  EXPECT_LT(top, h.find("Run overview"));
  EXPECT_TRUE(has(h, "class=\"finding warning\""));
  EXPECT_TRUE(has(h, "<span class=\"id\">memory.near_capacity</span>"));
  EXPECT_TRUE(has(h, "<pre><code>"));
  EXPECT_TRUE(has(h, "<th>141 GB</th>"));  // hardware fit table
}

TEST(ReportHtml, EscapesEveryNameFromTheReport) {
  RunReport r = synthetic();
  const std::string evil = "<script>alert(\"x\")</script><img src=x onerror=alert(1)>'&";
  r.run_name = evil;
  r.environment.device_name = evil;
  r.environment.hostname = evil;
  r.environment.not_measured.push_back({evil, evil});
  EpochSummary& e = r.epochs.back();
  e.telemetry->device_name = evil;
  e.telemetry->throttle.push_back({evil, 0.5});
  e.telemetry->not_measured.push_back({evil, evil});
  Finding f;
  f.id = evil;
  f.title = evil;
  f.evidence = {{evil, evil}};
  f.why = evil;
  f.estimated_gain = evil;
  f.fix = "</code></pre>" + evil;
  e.findings.insert(e.findings.begin(), f);
  const std::string h = format_html_report(r);
  EXPECT_FALSE(has(h, "<script>alert"));
  EXPECT_FALSE(has(h, "<img"));
  EXPECT_EQ(count(h, "<script>"), 1u);
  EXPECT_TRUE(has(h,
                  "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x "
                  "onerror=alert(1)&gt;&#39;&amp;"));
}

TEST(ReportHtml, GpuSectionCharts) {
  RunReport r = synthetic();
  r.epochs.back().gpu = test::gpu_summary_fixture();
  const std::string h = format_html_report(r);
  // Epoch 1 now charts Tensor Cores (all kernels + 2 phases) and busy/idle from the timeline.
  EXPECT_EQ(count(h, "<svg class=\"chart\""), 7u);
  EXPECT_TRUE(has(h, "<title>all kernels: Tensor Cores 200 ms of kernel time</title>"));
  // Unknown kernels are their own segment, not CUDA cores; the caption says how it was decided.
  EXPECT_TRUE(has(h, "<title>all kernels: CUDA cores 500 ms of kernel time</title>"));
  EXPECT_TRUE(has(h, "<title>all kernels: unknown 100 ms of kernel time</title>"));
  EXPECT_TRUE(has(h, "<title>backward: unknown 60.0 ms of kernel time</title>"));
  EXPECT_TRUE(has(h,
                  "Tensor Core share: 25.0 % of compute-kernel time. Decided by kernel name: "
                  "150.0 ms on Tensor Cores, 500.0 ms on CUDA cores; by the launching op: 50.0 ms "
                  "on Tensor Cores; unknown: 100.0 ms. 12.5% of compute-kernel time is in kernels "
                  "whose names say neither"));
  // Copies against the link's peak, from the copy records.
  EXPECT_TRUE(has(h, "<title>HtoD: achieved (copy records) 4.19 GB/s</title>"));
  EXPECT_TRUE(has(h, "Link: PCIe gen4 x16."));
  // Busy 60 %, idle split by cause.
  EXPECT_TRUE(has(h, "<title>GPU 0: busy 60.0 % of the steps</title>"));
  EXPECT_TRUE(has(h, "<title>GPU 0: idle: host sync 10.0 % of the steps</title>"));
  // Kernel and op names are escaped.
  EXPECT_TRUE(has(h, "sm90_xmma_gemm_f32f32_&lt;float&gt;_&quot;ffma&quot;"));
  EXPECT_TRUE(has(h, "aten::addmm&lt;script&gt;"));
  EXPECT_FALSE(has(h, "aten::addmm<script>"));
}

TEST(ReportHtml, EmptyReport) {
  RunReport r;
  r.run_name = "empty";
  const std::string h = format_html_report(r);
  EXPECT_TRUE(has(h, "No epoch has ended"));
  EXPECT_TRUE(has(h, "data-fathom-rendered"));
}

}  // namespace
}  // namespace fathom
