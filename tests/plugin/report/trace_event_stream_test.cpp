#include "report/trace_event_stream.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "../../support/trace_event_check.h"
#include "base/file_system.h"
#include "report/progress_line.h"

namespace fathom {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_path(const char* name) {
  return fs::temp_directory() + "/fathom-trace-" + std::to_string(::getpid()) + "-" + name;
}

std::vector<nlohmann::json> with_ph(const nlohmann::json& events, const std::string& ph) {
  std::vector<nlohmann::json> out;
  for (const auto& e : events)
    if (e.value("ph", "") == ph) out.push_back(e);
  return out;
}

TEST(TraceEventStream, ScopesNestAsBeginEndPairsInMicrosecondsFromTheOrigin) {
  const std::string path = temp_path("scopes.json");
  {
    TraceEventStream t(path, 1'000'000, "fathom run");
    t.begin("epoch 0", "epoch", 1'000'000);
    t.complete("data", "phase", 1'000'000, 1'250'500);
    t.begin("step 0", "step", 1'250'500);
    t.begin("forward", "phase", 1'300'000);
    t.begin("0 (Linear)", "module", 1'300'100);
    t.end(1'400'000);
    t.end(1'500'000);
    t.end(2'000'000);
    t.instant("data loading bounds the step", "finding", 2'000'000,
              R"({"id":"data.loader_bound"})");
    t.end(2'000'000);
    t.close(2'000'000);
  }
  const auto c = test::check_trace_events(read(path));
  EXPECT_TRUE(c.problems.empty()) << c.problems.front();
  EXPECT_TRUE(c.closed);
  EXPECT_TRUE(c.open_at_end.empty());
  const auto begins = with_ph(c.events, "B");
  ASSERT_EQ(begins.size(), 4u);
  EXPECT_EQ(begins[0]["name"], "epoch 0");
  EXPECT_DOUBLE_EQ(begins[0]["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(begins[1]["ts"].get<double>(), 250.5);  // ns kept: 250,500 ns
  EXPECT_EQ(begins[3]["cat"], "module");
  const auto data = with_ph(c.events, "X");
  ASSERT_EQ(data.size(), 1u);
  EXPECT_DOUBLE_EQ(data[0]["dur"].get<double>(), 250.5);
  const auto findings = with_ph(c.events, "i");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0]["args"]["id"], "data.loader_bound");
  EXPECT_NE(findings[0]["tid"], begins[0]["tid"]);  // a track of its own
  fs::remove_tree(path);
}

// The file a killed run leaves: everything up to the last flush, without the closing bracket,
// which the format (and the viewers) accept.
TEST(TraceEventStream, AFileCutAfterAFlushIsAnUnclosedButValidTrace) {
  const std::string path = temp_path("cut.json");
  TraceEventStream t(path, 0, "fathom");
  t.begin("epoch 0", "epoch", 10);
  t.begin("step 0", "step", 20);
  t.flush();
  const auto c = test::check_trace_events(read(path));
  EXPECT_TRUE(c.problems.empty()) << c.problems.front();
  EXPECT_FALSE(c.closed);
  EXPECT_EQ(with_ph(c.events, "B").size(), 2u);
  t.close(30);  // ends what was open, balanced
  const auto closed = test::check_trace_events(read(path));
  EXPECT_TRUE(closed.problems.empty());
  EXPECT_TRUE(closed.closed);
  EXPECT_TRUE(closed.open_at_end.empty());
  fs::remove_tree(path);
}

TEST(TraceEventStream, GpuWorkLandsOnItsStreamsInTimeOrderWithTheDeviceNamed) {
  const std::string path = temp_path("gpu.json");
  GpuActivity g;
  g.devices.push_back({0, "NVIDIA H200", 9, 0, 1});
  KernelRecord late, early;
  late.name = "sm90_gemm";
  late.start_ns = 5'000;
  late.end_ns = 9'000;
  late.stream = 7;
  early = late;
  early.name = "elementwise";
  early.start_ns = 1'000;
  early.end_ns = 2'000;
  g.kernels = {late, early};  // out of order in the batch
  MemcpyRecord m;
  m.kind = MemcpyKind::HostToDevice;
  m.start_ns = 500;
  m.end_ns = 900;
  m.stream = 3;
  m.bytes = 4096;
  g.memcpys.push_back(m);
  {
    TraceEventStream t(path, 0, "fathom");
    t.gpu(g);
    t.close(10'000);
  }
  const auto c = test::check_trace_events(read(path));
  EXPECT_TRUE(c.problems.empty()) << c.problems.front();
  const auto x = with_ph(c.events, "X");
  ASSERT_EQ(x.size(), 3u);
  std::vector<std::string> on_7;
  for (const auto& e : x) {
    EXPECT_EQ(e["pid"], 2);
    if (e["tid"] == 7) on_7.push_back(e["name"]);
    if (e["tid"] == 3) {
      EXPECT_EQ(e["name"], "Memcpy HtoD");
      EXPECT_EQ(e["args"]["bytes"], 4096);
    }
  }
  EXPECT_EQ(on_7, (std::vector<std::string>{"elementwise", "sm90_gemm"}));
  bool named = false;
  for (const auto& e : with_ph(c.events, "M"))
    named = named || (e["name"] == "process_name" && e["pid"] == 2 &&
                      e["args"]["name"] == "GPU 0 (NVIDIA H200)");
  EXPECT_TRUE(named);
  fs::remove_tree(path);
}

// The checker itself: a trace the format forbids is caught, so the tests above can fail.
TEST(TraceEventCheck, FindsUnbalancedScopesAndTimeGoingBack) {
  const auto c = test::check_trace_events(
      R"([{"ph":"B","pid":1,"tid":1,"ts":5,"name":"a"},{"ph":"E","pid":1,"tid":1,"ts":4},)"
      R"({"ph":"E","pid":1,"tid":1,"ts":6},{"ph":"X","pid":1,"tid":2,"ts":1,"name":"x"}])");
  ASSERT_EQ(c.problems.size(), 3u);
  EXPECT_NE(c.problems[0].find("goes back"), std::string::npos);
  EXPECT_NE(c.problems[1].find("E without its B"), std::string::npos);
  EXPECT_NE(c.problems[2].find("duration"), std::string::npos);
}

TEST(ProgressLine, SaysTheStepTheRateTheTimeTheMemoryAndTheFindings) {
  ProgressSample s;
  s.epoch = 2;
  s.step = 340;
  s.samples_per_s = 2310.4;
  s.step_ms = 13.86;
  s.memory_bytes = std::int64_t{3} << 29;
  s.findings = 3;
  s.findings_epoch = 1;
  EXPECT_EQ(progress_line_text(s),
            "fathom  epoch 2  step 340  2310 samples/s  13.9 ms/step  RSS 1.50 GiB  3 findings "
            "(epoch 1)");
  ProgressSample bare;
  bare.step_ms = 0.0425;
  EXPECT_EQ(progress_line_text(bare), "fathom  epoch 0  step 0  42 us/step");
}

}  // namespace
}  // namespace fathom
