#include <fathom/error.h>
#include <fathom/gpu_summary.h>
#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "aggregate/gpu_aggregator.h"
#include "analyze/summarize_gpu.h"
#include "gpu_summary_fixture.h"
#include "sample_report.h"
#include "synthetic_activity.h"

namespace fathom {
namespace {

GpuSummary full_summary() {
  GpuActivity a = test::one_step();
  a.syncs.push_back(SyncRecord{SyncKind::Stream, 7, test::us(780), test::us(810), 0});
  GpuSummaryOptions o;
  o.source = "cupti";
  o.link = LinkPeak{31.5, "PCIe gen4 x16"};
  GpuSummary s = summarize_gpu(aggregate(a), o);
  s.dropped_records = 3;
  s.not_measured.push_back({"hardware tensor-pipe utilisation", "counters not permitted"});
  return s;
}

TEST(GpuSummaryJson, RoundTripsEveryField) {
  const std::string text = format_gpu_summary_json(full_summary());
  const GpuSummary back = parse_gpu_summary_json(text, "gpu.json");
  EXPECT_EQ(format_gpu_summary_json(back), text);  // nothing dropped or changed
  EXPECT_DOUBLE_EQ(*back.tensor_cores.share, 200.0 / 355.0);
  EXPECT_EQ(back.tensor_cores.on_cuda_cores.at(0).misaligned, "M=30");
  EXPECT_EQ(back.transfers.rows.at(0).host_memory, MemoryKind::Pageable);
  EXPECT_EQ(back.timeline.devices.at(0).idle.sync_ns, test::us(50));
  EXPECT_EQ(back.not_measured.at(0).why, "counters not permitted");
  EXPECT_EQ(back.devices.at(0).compute_major, 8);
}

TEST(GpuSummaryJson, DecisionsRoundTrip) {
  const std::string text = format_gpu_summary_json(test::gpu_summary_fixture());
  const nlohmann::json tc = nlohmann::json::parse(text).at("tensor_cores");
  EXPECT_EQ(tc.at("decisions").at("tensor_cores_by_op").at("count"), 100);
  EXPECT_EQ(tc.at("decisions").at("unknown").at("ns"), 100'000'000);
  EXPECT_EQ(tc.at("unknown_share"), 0.125);
  EXPECT_EQ(tc.at("phases").at(0).at("unknown_ns"), 40'000'000);
  const GpuSummary back = parse_gpu_summary_json(text, "gpu.json");
  EXPECT_EQ(format_gpu_summary_json(back), text);
  EXPECT_EQ(back.tensor_cores.decisions.unknown.ns, 100'000'000);
  EXPECT_EQ(back.tensor_cores.phases.at(1).unknown_ns, 60'000'000);
  EXPECT_TRUE(back.tensor_cores.op_dtypes_recorded);
}

// Sections written before the decisions existed counted every kernel outside a Tensor Core family
// as CUDA cores: they read back that way.
TEST(GpuSummaryJson, SectionsWithoutDecisionsReadAsNameDecided) {
  nlohmann::json j = nlohmann::json::parse(format_gpu_summary_json(full_summary()));
  nlohmann::json& tc = j["tensor_cores"];
  for (const char* k : {"decisions", "unknown_share", "op_dtypes_recorded", "eligible_unknown_ns"})
    tc.erase(k);
  for (auto& f : tc["families"]) f.erase("decision");
  const GpuSummary back = parse_gpu_summary_json(j.dump(), "old.json");
  const TensorCoreDecisions& d = back.tensor_cores.decisions;
  EXPECT_EQ(d.tensor_cores_by_name.ns, test::us(200));
  EXPECT_EQ(d.cuda_cores_by_name.ns, test::us(155));
  EXPECT_EQ(d.cuda_cores_by_name.count, 3);
  EXPECT_EQ(d.unknown.ns, 0);
  EXPECT_EQ(back.tensor_cores.families.at(0).decision, "name");
}

TEST(GpuSummaryJson, UnmeasuredIsNullNotZero) {
  GpuActivity a;
  a.kernels = {test::kernel(test::kSgemm, 0, 100, 0)};
  const std::string text = format_gpu_summary_json(summarize_gpu(aggregate(a)));
  EXPECT_NE(text.find("\"gb_per_s\": null"), std::string::npos) << text;  // link peak unknown
  EXPECT_NE(text.find("\"communication_share\": null"), std::string::npos);
  EXPECT_NE(text.find("\"share_of_window\": null"), std::string::npos);  // no copies
}

TEST(GpuSummaryJson, NoActivityWritesNullAnalyses) {
  const GpuSummary s = summarize_gpu(aggregate(GpuActivity{}));
  const std::string text = format_gpu_summary_json(s);
  for (const char* k : {"\"tensor_cores\": null", "\"transfers\": null", "\"timeline\": null",
                        "\"gpu_activity\": false"})
    EXPECT_NE(text.find(k), std::string::npos) << k;
  EXPECT_EQ(format_gpu_summary_json(parse_gpu_summary_json(text, "x")), text);
}

// steps_not_listed counts the steps past the table's limit: without the table (a file that lists
// no steps) there is nothing it could count, and the reader leaves it at 0.
TEST(GpuSummaryJson, StepsNotListedWithoutAStepTableIsLeftOut) {
  GpuSummary s = full_summary();
  s.steps.clear();
  nlohmann::json j = nlohmann::json::parse(format_gpu_summary_json(s));
  j.erase("steps");
  j["steps_not_listed"] = 7;
  EXPECT_EQ(parse_gpu_summary_json(j.dump(), "no-steps.json").steps_not_listed, 0);
}

TEST(GpuSummaryJson, BadInputIsAClearError) {
  std::string text = format_gpu_summary_json(full_summary());
  EXPECT_THROW((void)parse_gpu_summary_json(text.substr(0, text.size() / 2), "cut.json"), Error);
  text.replace(text.find("\"HtoD\""), 6, "\"UpDn\"");
  try {
    (void)parse_gpu_summary_json(text, "bad.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "fathom: bad.json: unknown copy direction 'UpDn'");
  }
  EXPECT_THROW((void)parse_gpu_summary_json("{}", "empty.json"), Error);
}

TEST(GpuSummaryJson, AnalysisDocument) {
  const std::string text = format_gpu_analysis_json(full_summary(), "trace.json.gz");
  EXPECT_NE(text.find("\"schema\": \"fathom.analysis\""), std::string::npos);
  EXPECT_NE(text.find("\"schema_version\": 2"), std::string::npos);
  EXPECT_NE(text.find("\"input\": \"trace.json.gz\""), std::string::npos);
}

// The report carries the section in each epoch, and reads it back.
TEST(GpuSummaryJson, ReportRoundTripWithGpuSection) {
  RunReport r = test::sample_report();
  r.epochs[0].gpu = full_summary();
  const std::string text = format_json_report(r);
  EXPECT_NE(text.find("\"gpu\": {"), std::string::npos);
  const RunReport back = parse_json_report(text, "run.json");
  ASSERT_TRUE(back.epochs.at(0).gpu.has_value());
  EXPECT_EQ(format_json_report(back), text);
  EXPECT_EQ(back.epochs[0].gpu->timeline.devices.at(0).idle.host_launch_ns, test::us(170));
}

TEST(GpuSummaryJson, ReportWithoutGpuSectionSaysNull) {
  const std::string text = format_json_report(test::sample_report());
  EXPECT_NE(text.find("\"gpu\": null"), std::string::npos);
  EXPECT_FALSE(parse_json_report(text, "run.json").epochs.at(0).gpu.has_value());
}

}  // namespace
}  // namespace fathom
