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
  EXPECT_EQ(back.environment.not_measured.at(0).id, UnmeasuredId::GpuActivity);
  EXPECT_EQ(back.epochs[0].phase(Phase::Forward).device_memory->peak_reserved_bytes, 2LL << 30);
  EXPECT_FALSE(back.epochs[0].phase(Phase::Backward).device_ms_total.has_value());
  EXPECT_EQ(back.epochs[0].findings.at(0).fix, "line one\nline two");
}

TEST(ReportJson, NotMeasuredEntriesCarryTheirIdAndOldReportsGetOne) {
  RunReport r = test::sample_report();
  r.environment.not_measured = {{"anything", "because", UnmeasuredId::DeviceMemory}};
  const std::string text = format_json_report(r);
  EXPECT_NE(text.find("\"id\": \"device_memory\""), std::string::npos);
  EXPECT_EQ(parse_json_report(text, "mem").environment.not_measured.at(0).id,
            UnmeasuredId::DeviceMemory);
  // A report from before ids (no "id" key) is given them from its words, once, when read.
  std::string old = text;
  old.erase(old.find("\"id\": \"device_memory\","),
            std::string("\"id\": \"device_memory\",").size());
  EXPECT_EQ(parse_json_report(old, "old").environment.not_measured.at(0).id, UnmeasuredId::Other);
}

// An older writer's null id is no id: the entry gets one from its words, as when "id" is absent.
TEST(ReportJson, ANullNotMeasuredIdIsReadAsNoId) {
  RunReport r = test::sample_report();
  r.environment.not_measured = {
      {"device memory per phase", "no CUDA device", UnmeasuredId::DeviceMemory}};
  std::string text = format_json_report(r);
  const std::string id = "\"id\": \"device_memory\"";
  text.replace(text.find(id), id.size(), "\"id\": null");
  EXPECT_EQ(parse_json_report(text, "null-id").environment.not_measured.at(0).id,
            UnmeasuredId::DeviceMemory);
}

TEST(ReportJson, DocumentedTopLevelFields) {
  const std::string text = format_json_report(test::sample_report());
  for (const char* key :
       {"\"schema\": \"fathom.report\"", "\"schema_version\": 1", "\"environment\"",
        "\"not_measured\"", "\"epochs\"", "\"phases\"", "\"samples_per_second\"", "\"findings\""}) {
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
    EXPECT_NE(std::string(e.what()).find("run.json is not valid JSON"), std::string::npos)
        << e.what();
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

// The mode, the origin and the loop's language are enums in the model; JSON carries their names.
TEST(ReportJson, ModeOriginAndLanguageRoundTripAsEnums) {
  RunReport r = test::sample_report();
  r.environment.mode = Mode::Auto;
  r.environment.language = LoopLanguage::Python;
  const std::string text = format_json_report(r);
  EXPECT_NE(text.find("\"origin\": \"session\""), std::string::npos);
  EXPECT_NE(text.find("\"mode\": \"auto\""), std::string::npos);
  const Environment back = parse_json_report(text, "r").environment;
  EXPECT_EQ(back.origin, ReportOrigin::Session);
  EXPECT_EQ(back.mode, Mode::Auto);
  EXPECT_EQ(back.language, LoopLanguage::Python);

  // An export's report has an origin and no mode; one written before "origin" said so in "mode".
  r.environment.mode.reset();
  r.environment.origin = ReportOrigin::NsightExport;
  std::string exported = format_json_report(r);
  EXPECT_NE(exported.find("\"mode\": null"), std::string::npos);
  EXPECT_EQ(parse_json_report(exported, "e").environment.origin, ReportOrigin::NsightExport);
  exported.erase(exported.find("\"origin\": \"nsight export\","),
                 std::string("\"origin\": \"nsight export\",").size());
  exported.replace(exported.find("\"mode\": null"), std::string("\"mode\": null").size(),
                   "\"mode\": \"nsight export\"");
  const Environment old = parse_json_report(exported, "old").environment;
  EXPECT_EQ(old.origin, ReportOrigin::NsightExport);
  EXPECT_FALSE(old.mode.has_value());
  EXPECT_EQ(old.mode_text(), "nsight export");
}

// A mode or language fathom never writes is an error that names the value, not a string carried
// on to the advisor (which compared strings and silently matched none).
TEST(ReportJson, UnknownModeOrLanguageIsAnError) {
  const std::string text = format_json_report(test::sample_report());
  std::string mode = text;
  mode.replace(mode.find("\"mode\": \"suggest\""), std::string("\"mode\": \"suggest\"").size(),
               "\"mode\": \"sugest\"");
  try {
    (void)parse_json_report(mode, "m.json");
    FAIL() << "an unknown mode was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sugest"), std::string::npos) << e.what();
  }
  std::string language = text;
  language.replace(language.find("\"language\": \"c++\""),
                   std::string("\"language\": \"c++\"").size(), "\"language\": \"rust\"");
  EXPECT_THROW((void)parse_json_report(language, "l.json"), Error);
}

TEST(ReportJson, MissingFieldNamesTheProblem) {
  std::string text = format_json_report(test::sample_report());
  text.replace(text.find("\"run_name\""), 10, "\"run_nome\"");
  EXPECT_THROW((void)parse_json_report(text, "x.json"), Error);
}

TEST(ReportJson, TelemetryFootprintAndHardwareFitRoundTrip) {
  RunReport r = test::sample_report();
  EpochSummary& e = r.epochs[0];
  DeviceTelemetry t;
  t.source = "nvml";
  t.device_name = "NVIDIA H200";
  t.samples = 3;
  t.gpu_utilization_pct_mean = 61.5;
  t.energy_j = 1234.5;
  t.throttle = {{"sw_power_cap", 0.25}};
  t.pcie = PcieLinkState{4, 16, 5, 16, true};
  t.series = {{0.0, 50.0, 1e9, 300.0, 1980.0, std::nullopt, 5e9}};
  t.not_measured = {{"PCIe transmit throughput (NVML)", "Not Supported"}};
  e.telemetry = t;
  MemoryFootprint m;
  m.parameter_count = 1000;
  m.parameter_bytes = 4000;
  m.gradient_bytes = 4000;
  m.optimizer_state_bytes = 8000;
  m.activation_bytes = 1 << 20;
  m.checkpointable_blocks = 16;
  e.footprint = m;
  const std::string text = format_json_report(r);
  EXPECT_NE(text.find("\"hardware_fit\""), std::string::npos);
  EXPECT_NE(text.find("\"141 GB\": \"fits\""), std::string::npos);
  const RunReport back = parse_json_report(text, "mem");
  EXPECT_EQ(format_json_report(back), text);
  ASSERT_TRUE(back.epochs[0].telemetry);
  EXPECT_DOUBLE_EQ(*back.epochs[0].telemetry->energy_j, 1234.5);
  EXPECT_EQ(back.epochs[0].telemetry->pcie.max_gen, 5);
  EXPECT_FALSE(back.epochs[0].telemetry->series.at(0).pcie_tx_bytes_per_s);
  EXPECT_EQ(back.epochs[0].footprint->checkpointable_blocks, 16);
  EXPECT_EQ(back.epochs[0].footprint->optimizer_state_bytes, 8000);

  // No optimizer watched: null in the file, not measured in the text, never a 0.
  r.epochs[0].footprint->optimizer_state_bytes.reset();
  const std::string unwatched = format_json_report(r);
  EXPECT_NE(unwatched.find("\"optimizer_state_bytes\": null"), std::string::npos);
  EXPECT_FALSE(parse_json_report(unwatched, "mem").epochs[0].footprint->optimizer_state_bytes);
  const std::string terminal = format_terminal_report(r, 0);
  EXPECT_NE(terminal.find("optimizer state not measured"), std::string::npos) << terminal;

  // Activations nothing measured: null with its reason, read back as not measured.
  r.epochs[0].footprint->activation_bytes.reset();
  r.epochs[0].footprint->activation_why = "no model ran through fathom::forward";
  const std::string unseen = format_json_report(r);
  EXPECT_NE(unseen.find("\"activation_bytes\": null"), std::string::npos);
  EXPECT_NE(unseen.find("\"activation_bytes_why\": \"no model ran through fathom::forward\""),
            std::string::npos);
  const RunReport unseen_back = parse_json_report(unseen, "mem");
  EXPECT_FALSE(unseen_back.epochs[0].footprint->activation_bytes);
  EXPECT_EQ(unseen_back.epochs[0].footprint->activation_why,
            "no model ran through fathom::forward");
  // Said once, where no configuration could be estimated (issue 24: once per row before).
  EXPECT_NE(format_terminal_report(r, 0).find(
                "configurations not estimated: activation bytes not measured: no model ran"),
            std::string::npos);
}

TEST(ReportJson, FootprintKeepsEachModelsShare) {
  RunReport r = test::sample_report();
  MemoryFootprint m;
  m.parameter_count = 30;
  m.parameter_bytes = 120;
  m.gradient_bytes = 120;
  m.optimizer_state_bytes = 160;
  m.activation_bytes = 4096;
  m.models = {{"Generator", 20, 80, 80, 160}, {"Discriminator", 10, 40, 40, std::nullopt}};
  r.epochs.at(0).footprint = m;
  const std::string text = format_json_report(r);
  const RunReport back = parse_json_report(text, "gan");
  ASSERT_EQ(back.epochs[0].footprint->models.size(), 2u);
  EXPECT_EQ(back.epochs[0].footprint->models[0].name, "Generator");
  EXPECT_EQ(back.epochs[0].footprint->models[0].optimizer_state_bytes, 160);
  EXPECT_FALSE(back.epochs[0].footprint->models[1].optimizer_state_bytes);
  EXPECT_EQ(back.epochs[0].footprint->models[1].parameter_count, 10);
  EXPECT_EQ(format_json_report(back), text);
}

TEST(ReportJson, ReportsWithoutTelemetryOrFootprintStillRead) {
  std::string text = format_json_report(test::sample_report());
  for (const char* key :
       {"  \"telemetry\": null,\n", "  \"footprint\": null,\n", "  \"hardware_fit\": null,\n"}) {
    const auto at = text.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    text.erase(text.rfind('\n', at) + 1, text.find('\n', at) - text.rfind('\n', at));
  }
  const RunReport back = parse_json_report(text, "old.json");
  EXPECT_FALSE(back.epochs[0].telemetry);
  EXPECT_FALSE(back.epochs[0].footprint);
}

TEST(ReportJson, InvalidUtf8NamesAreReplacedNotFatal) {
  RunReport r = test::sample_report();
  r.epochs[0].findings[0].title = "kernel \xff\xfe name";
  std::string text;
  ASSERT_NO_THROW(text = format_json_report(r));
  EXPECT_NE(text.find("kernel \xef\xbf\xbd\xef\xbf\xbd name"), std::string::npos);
}

}  // namespace
}  // namespace fathom
