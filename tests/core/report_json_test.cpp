#include <fathom/error.h>
#include <fathom/report_writers.h>

#include <gtest/gtest.h>

#include "sample_report.h"

namespace fathom {
namespace {

TEST(ReportJson, RoundTripsEveryField) {
  RunReport r = test::sample_report();
  const std::string text = format_json_report(r);
  RunReport back = parse_json_report(text, "mem");
  // Writing what was read gives the same text: nothing was dropped or changed.
  EXPECT_EQ(format_json_report(back), text);
  ASSERT_EQ(back.epochs.size(), 1u);
  EXPECT_EQ(back.environment.not_measured.at(0).why, "CUPTI busy: another profiler holds it");
  EXPECT_EQ(back.epochs[0].phase(Phase::Forward).device_memory->peak_reserved_bytes, 2LL << 30);
  EXPECT_FALSE(back.epochs[0].phase(Phase::Backward).device_ms_total.has_value());
  EXPECT_EQ(back.epochs[0].findings.at(0).fix, "line one\nline two");
}

TEST(ReportJson, DocumentedTopLevelFields) {
  const std::string text = format_json_report(test::sample_report());
  for (const char* key : {"\"schema\": \"fathom.report\"", "\"schema_version\": 1", "\"environment\"",
                          "\"not_measured\"", "\"epochs\"", "\"phases\"", "\"samples_per_second\"",
                          "\"findings\""}) {
    EXPECT_NE(text.find(key), std::string::npos) << key;
  }
}

TEST(ReportJson, AbsentMeasurementsAreNullNotZero) {
  const std::string text = format_json_report(test::sample_report());
  EXPECT_NE(text.find("\"device_ms_total\": null"), std::string::npos);
}

TEST(ReportJson, TruncatedFileIsAClearError) {
  std::string text = format_json_report(test::sample_report());
  text.resize(text.size() / 2);
  try {
    (void)parse_json_report(text, "run.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run.json is not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(ReportJson, ForeignJsonIsRejected) {
  EXPECT_THROW((void)parse_json_report("{\"traceEvents\": []}", "trace.json"), Error);
  EXPECT_THROW((void)parse_json_report("[1,2]", "list.json"), Error);
}

TEST(ReportJson, OtherSchemaVersionIsRejected) {
  std::string text = format_json_report(test::sample_report());
  text.replace(text.find("\"schema_version\": 1"), 19, "\"schema_version\": 99");
  try {
    (void)parse_json_report(text, "new.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version 99"), std::string::npos) << e.what();
  }
}

TEST(ReportJson, MissingFieldNamesTheProblem) {
  std::string text = format_json_report(test::sample_report());
  text.replace(text.find("\"run_name\""), 10, "\"run_nome\"");
  EXPECT_THROW((void)parse_json_report(text, "x.json"), Error);
}

}  // namespace
}  // namespace fathom
