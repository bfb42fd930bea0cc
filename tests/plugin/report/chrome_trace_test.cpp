#include "report/chrome_trace.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

namespace fathom {
namespace {

using nlohmann::json;

std::vector<json> events_named(const json& trace, const std::string& name) {
  std::vector<json> out;
  for (const json& e : trace.at("traceEvents"))
    if (e.value("name", "") == name) out.push_back(e);
  return out;
}

TEST(ChromeTrace, HostScopesAsCompleteEventsInMicroseconds) {
  std::vector<StepRecord> steps{{0, 32, 1'000'000, 11'000'000, false}};
  std::vector<PhaseRecord> phases(2);
  phases[0].phase = Phase::Forward;
  phases[0].begin_ns = 2'000'000;
  phases[0].end_ns = 5'500'000;
  phases[0].device_ms = 3.25;
  phases[1].phase = Phase::Backward;
  phases[1].begin_ns = 5'500'000;
  phases[1].end_ns = 10'000'000;
  std::vector<CopyRecord> copies{
      {CopyDirection::HostToDevice, 4096, true, true, 1'500'000, 1'600'000, 0}};
  TraceInput in;
  in.steps = steps;
  in.phases = phases;
  in.copies = copies;
  const json t = json::parse(format_chrome_trace(in));
  EXPECT_EQ(t.at("displayTimeUnit"), "ms");
  const auto fwd = events_named(t, "forward");
  ASSERT_EQ(fwd.size(), 1u);
  EXPECT_EQ(fwd[0].at("ph"), "X");
  EXPECT_DOUBLE_EQ(fwd[0].at("ts").get<double>(), 1000.0);  // relative to the first event
  EXPECT_DOUBLE_EQ(fwd[0].at("dur").get<double>(), 3500.0);
  EXPECT_DOUBLE_EQ(fwd[0].at("args").at("device_ms").get<double>(), 3.25);
  const auto step = events_named(t, "step 0");
  ASSERT_EQ(step.size(), 1u);
  EXPECT_DOUBLE_EQ(step[0].at("ts").get<double>(), 0.0);
  EXPECT_EQ(step[0].at("args").at("samples"), 32);
  const auto copy = events_named(t, "host_to_device");
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(copy[0].at("args").at("bytes"), 4096);
  // Steps, phases and copies on their own named tracks of the host process.
  EXPECT_NE(step[0].at("tid"), fwd[0].at("tid"));
  bool named_phases = false;
  for (const json& e : events_named(t, "thread_name"))
    named_phases =
        named_phases || (e.at("args").at("name") == "phases" && e.at("tid") == fwd[0].at("tid"));
  EXPECT_TRUE(named_phases);
}

GpuActivity gpu() {
  GpuActivity g;
  g.devices.push_back({0, "NVIDIA H200", 9, 0, 150'000'000'000});
  KernelRecord k;
  k.name = "sm90_xmma_gemm_bf16bf16_\"quoted\"<kernel>";
  k.stream = 7;
  k.start_ns = 100'000;
  k.end_ns = 150'000;
  k.grid_x = 128;
  g.kernels.push_back(k);
  MemcpyRecord m;
  m.kind = MemcpyKind::HostToDevice;
  m.src = MemoryKind::Pageable;
  m.dst = MemoryKind::Device;
  m.bytes = 1 << 20;
  m.stream = 7;
  m.start_ns = 50'000;
  m.end_ns = 90'000;
  g.memcpys.push_back(m);
  g.dropped_records = 3;
  return g;
}

TEST(ChromeTrace, GpuActivityPerDeviceAndStream) {
  const GpuActivity g = gpu();
  TraceInput in;
  in.gpu = &g;
  const json t = json::parse(format_chrome_trace(in));
  const auto k = events_named(t, "sm90_xmma_gemm_bf16bf16_\"quoted\"<kernel>");
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].at("pid"), 2);
  EXPECT_EQ(k[0].at("tid"), 7);
  EXPECT_DOUBLE_EQ(k[0].at("ts").get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(k[0].at("dur").get<double>(), 50.0);
  const auto m = events_named(t, "Memcpy HtoD");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].at("args").at("src"), "pageable");
  bool gpu_named = false;
  for (const json& e : events_named(t, "process_name"))
    gpu_named = gpu_named || e.at("args").at("name") == "GPU 0 (NVIDIA H200)";
  EXPECT_TRUE(gpu_named);
  EXPECT_EQ(t.at("otherData").at("dropped_gpu_records"), 3);
}

TEST(ChromeTrace, ClocksAlignedOnlyWhenTheOffsetIsKnown) {
  const GpuActivity g = gpu();
  std::vector<StepRecord> steps{{0, 1, 1'000'000'000, 1'001'000'000, false}};
  TraceInput in;
  in.steps = steps;
  in.gpu = &g;
  json t = json::parse(format_chrome_trace(in));
  EXPECT_TRUE(t.at("otherData").contains("clocks"));
  EXPECT_DOUBLE_EQ(events_named(t, "Memcpy HtoD")[0].at("ts").get<double>(), 0.0);

  in.gpu_to_host_ns = 1'000'000'000 - 40'000;  // the copy starts 10 us after the step
  t = json::parse(format_chrome_trace(in));
  EXPECT_FALSE(t.at("otherData").contains("clocks"));
  EXPECT_DOUBLE_EQ(events_named(t, "step 0")[0].at("ts").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(events_named(t, "Memcpy HtoD")[0].at("ts").get<double>(), 10.0);
}

TEST(ChromeTrace, InvalidUtf8NamesDoNotBreakTheExport) {
  GpuActivity g;
  KernelRecord k;
  k.name = "bad\xff\xfename";
  k.end_ns = 10;
  g.kernels.push_back(k);
  TraceInput in;
  in.gpu = &g;
  json parsed;
  EXPECT_NO_THROW(parsed = json::parse(format_chrome_trace(in)));
  // The kernel; host and GPU process name and sort order; the stream's name.
  EXPECT_EQ(parsed.at("traceEvents").size(), 6u);
}

TEST(ChromeTrace, EmptyInputIsAValidTrace) {
  const json t = json::parse(format_chrome_trace(TraceInput{}));
  EXPECT_TRUE(t.at("traceEvents").is_array());
}

}  // namespace
}  // namespace fathom
