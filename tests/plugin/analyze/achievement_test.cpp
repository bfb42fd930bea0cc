// What the run achieved: the CPU packages' energy counters (a powercap tree written here), the
// energy per epoch, step and sample, throughput and MFU from counted FLOPs, the low-MFU finding
// linked to the timeline, and the JSON of all three sections.
#include <fathom/report_writers.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "advise/advisor.h"
#include "analyze/achievement_derived.h"
#include "collect/package_energy.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;

class PowercapTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root = fs::temp_directory_path() / ("fathom_powercap_" + std::to_string(::getpid()));
    fs::remove_all(root);
    zone("intel-rapl:0", "package-0", 1'000'000, 262'143'328'850);
    zone("intel-rapl:1", "package-1", 5'000'000, 262'143'328'850);
    zone("intel-rapl:0:0", "core", 7, 0);  // a subzone: not a package
    zone("intel-rapl:2", "psys", 9, 0);    // not a package
  }
  void TearDown() override { fs::remove_all(root); }
  void zone(const std::string& dir, const std::string& name, std::uint64_t uj, std::uint64_t max) {
    fs::create_directories(root / dir);
    std::ofstream(root / dir / "name") << name << "\n";
    std::ofstream(root / dir / "energy_uj") << uj << "\n";
    if (max) std::ofstream(root / dir / "max_energy_range_uj") << max << "\n";
  }
  fs::path root;
};

TEST_F(PowercapTree, PackagesAreSummedAndWrapsHandled) {
  const PackageEnergyReading a = read_package_energy(root.string());
  ASSERT_EQ(a.zones.size(), 2u) << a.why;
  zone("intel-rapl:0", "package-0", 3'500'000, 262'143'328'850);  // +2.5 J
  zone("intel-rapl:1", "package-1", 1'000'000, 262'143'328'850);  // wrapped
  const PackageEnergyReading b = read_package_energy(root.string());
  const auto j = package_energy_j(a, b);
  ASSERT_TRUE(j);
  EXPECT_NEAR(*j, 2.5 + (262'143'328'850.0 - 5'000'000 + 1'000'000) / 1e6, 1e-6);
}

TEST_F(PowercapTree, AnUnreadableCounterSaysWhichFile) {
  // A folder where the counter should be: unreadable even for root (as a permission is not).
  fs::remove(root / "intel-rapl:1" / "energy_uj");
  fs::create_directories(root / "intel-rapl:1" / "energy_uj");
  const PackageEnergyReading r = read_package_energy(root.string());
  EXPECT_TRUE(r.zones.empty());
  EXPECT_NE(r.why.find("intel-rapl:1/energy_uj is not readable"), std::string::npos) << r.why;
}

TEST(PackageEnergy, AMissingTreeIsNotMeasuredWithItsReason) {
  const PackageEnergyReading r = read_package_energy("/nonexistent/powercap");
  EXPECT_TRUE(r.zones.empty());
  EXPECT_NE(r.why.find("does not exist"), std::string::npos);
  EXPECT_FALSE(package_energy_j(r, r));
}

TEST(Energy, NvmlCounterPerEpochStepAndSample) {
  EpochSummary e;
  e.steps = 100;
  e.samples = 6400;
  e.wall_ms = 20'000;
  e.telemetry = DeviceTelemetry{};
  e.telemetry->energy_j = 5000;  // a stand-in NVML's counter difference
  const EnergySummary s = summarize_energy(e, 123.0, "");
  EXPECT_NE(s.source.find("NVML"), std::string::npos);
  EXPECT_DOUBLE_EQ(*s.epoch_j, 5000);
  EXPECT_DOUBLE_EQ(*s.per_step_j, 50);
  EXPECT_DOUBLE_EQ(*s.per_sample_j, 5000.0 / 6400);
  EXPECT_DOUBLE_EQ(*s.average_w, 250);
}

TEST(Energy, CpuPackagesWhenNoGpuAndNotMeasuredWhenNeither) {
  EpochSummary e;
  e.steps = 10;
  e.wall_ms = 2000;
  const EnergySummary cpu = summarize_energy(e, 90.0, "");
  EXPECT_NE(cpu.source.find("RAPL"), std::string::npos);
  EXPECT_DOUBLE_EQ(*cpu.average_w, 45);
  EXPECT_FALSE(cpu.per_sample_j) << "no samples counted: not 0";
  const EnergySummary none =
      summarize_energy(e, std::nullopt, "/sys/class/powercap does not exist");
  EXPECT_FALSE(none.epoch_j);
  ASSERT_FALSE(none.not_measured.empty());
  EXPECT_NE(none.not_measured[0].why.find("/sys/class/powercap does not exist"), std::string::npos);
}

FlopsSummary counted(double fwd, double bwd, const char* dtype) {
  FlopsSummary f;
  f.profiled_steps = 3;
  f.forward = fwd;
  f.backward = bwd;
  f.per_step = fwd + bwd;
  f.dominant_dtype = dtype;
  f.by_op = {{"forward", "aten::mm", dtype, 2, fwd}, {"backward", "aten::mm", dtype, 4, bwd}};
  return f;
}

EpochSummary timed_epoch() {
  EpochSummary e;
  e.steps = 10;
  e.step_ms_total = 100;  // 10 ms a step
  for (Phase p : kAllPhases) e.phases[static_cast<std::size_t>(p)].phase = p;
  e.phases[static_cast<std::size_t>(Phase::Forward)].wall_ms_total = 30;
  e.phases[static_cast<std::size_t>(Phase::Forward)].device_ms_total = 20;  // 2 ms a step
  e.phases[static_cast<std::size_t>(Phase::Backward)].wall_ms_total = 50;
  e.phases[static_cast<std::size_t>(Phase::Backward)].device_ms_total = 40;
  return e;
}

TEST(FlopsThroughput, MfuAgainstTheDtypesPeakOnAGpu) {
  EpochSummary e = timed_epoch();
  Environment env;
  env.device = "cuda:0";
  env.device_name = "NVIDIA H100 80GB HBM3";
  FlopsSummary f = counted(2e12, 4e12, "bfloat16");
  derive_flops_throughput(f, e, env);
  ASSERT_TRUE(f.step_flops_per_s);
  EXPECT_DOUBLE_EQ(*f.step_flops_per_s, 6e12 / 0.01);
  ASSERT_TRUE(f.peak_flops_per_s);
  EXPECT_DOUBLE_EQ(*f.peak_flops_per_s, 989e12);
  EXPECT_NE(f.peak.find("bf16"), std::string::npos) << f.peak;
  EXPECT_DOUBLE_EQ(*f.mfu, 6e14 / 989e12);
  ASSERT_EQ(f.achieved.size(), 2u);
  const PhaseThroughput& fwd = f.achieved[1].phase == "forward" ? f.achieved[1] : f.achieved[0];
  EXPECT_EQ(fwd.time_source, "device");
  EXPECT_DOUBLE_EQ(*fwd.flops_per_s, 2e12 / 0.002);
}

TEST(FlopsThroughput, ACpuHasThroughputButNoMfu) {
  EpochSummary e = timed_epoch();
  Environment env;
  env.device = "cpu";
  FlopsSummary f = counted(1e9, 2e9, "float32");
  derive_flops_throughput(f, e, env);
  EXPECT_TRUE(f.step_flops_per_s);
  EXPECT_FALSE(f.mfu);
  EXPECT_FALSE(f.peak_flops_per_s);
  ASSERT_FALSE(f.not_measured.empty());
  EXPECT_NE(f.not_measured[0].why.find("no peak FLOP/s is known for CPUs"), std::string::npos);
  for (const PhaseThroughput& p : f.achieved) EXPECT_EQ(p.time_source, "wall");
}

TEST(FlopsThroughput, AnUnknownGpuSaysSo) {
  EpochSummary e = timed_epoch();
  Environment env;
  env.device = "cuda:0";
  env.device_name = "Some Future GPU";
  FlopsSummary f = counted(1e12, 2e12, "bfloat16");
  derive_flops_throughput(f, e, env);
  EXPECT_FALSE(f.mfu);
  ASSERT_FALSE(f.not_measured.empty());
  EXPECT_NE(f.not_measured[0].why.find("not in fathom's peak table"), std::string::npos);
}

TEST(FlopsThroughput, LowMfuIsLinkedToWhatTheTimelineSays) {
  EpochSummary e = timed_epoch();
  Environment env;
  env.device = "cuda:0";
  env.device_name = "NVIDIA H100 80GB HBM3";
  e.flops = counted(1e10, 2e10, "bfloat16");
  derive_flops_throughput(*e.flops, e, env);
  GpuSummary g;
  g.gpu_activity = true;
  g.timeline.window_ns = 1'000'000'000;
  DeviceTimeline d;
  d.idle_ns = 600'000'000;
  d.idle.host_launch_ns = 450'000'000;
  d.idle.data_wait_ns = 100'000'000;
  g.timeline.devices.push_back(d);
  g.tensor_cores.share = 0.02;
  e.gpu = g;
  const auto findings = advise(e, env);
  auto it = std::find_if(findings.begin(), findings.end(),
                         [](const Finding& f) { return f.id == finding_id::kLowUtilization; });
  ASSERT_NE(it, findings.end());
  EXPECT_EQ(it->severity, Severity::Warning);
  EXPECT_NE(it->why.find("most of it late launches"), std::string::npos) << it->why;
  EXPECT_NE(it->why.find("CUDA cores, not Tensor Cores"), std::string::npos) << it->why;
}

TEST(Achievement, FlopsEnergyAndSeriesRoundTripThroughTheJsonReport) {
  RunReport r;
  r.run_name = "achieved";
  EpochSummary e = timed_epoch();
  Environment env;
  env.device = "cuda:0";
  env.device_name = "NVIDIA H100 80GB HBM3";
  e.flops = counted(2e12, 4e12, "bfloat16");
  derive_flops_throughput(*e.flops, e, env);
  e.telemetry = DeviceTelemetry{};
  e.telemetry->energy_j = 10;
  e.energy = summarize_energy(e, std::nullopt, "");
  StepSeries s;
  s.memory = "resident (RSS)";
  s.points.push_back({0, 1.5, {}, 1000});
  s.points.push_back({1, 2.5, {}, std::nullopt});
  s.change = StepChange{1, 1.5, 2.5, 0.66, 1e-5, 1, 1, "forward", 1, 2};
  e.series = s;
  r.epochs.push_back(e);
  const RunReport back = parse_json_report(format_json_report(r), "achieved.json");
  const EpochSummary& b = back.epochs.at(0);
  ASSERT_TRUE(b.flops && b.energy && b.series);
  EXPECT_EQ(b.flops->by_op.size(), 2u);
  EXPECT_DOUBLE_EQ(*b.flops->mfu, *e.flops->mfu);
  EXPECT_EQ(b.flops->peak, e.flops->peak);
  EXPECT_DOUBLE_EQ(*b.energy->per_step_j, 1.0);
  EXPECT_EQ(b.series->points.size(), 2u);
  EXPECT_FALSE(b.series->points[1].memory_bytes);
  EXPECT_EQ(b.series->change->phase, "forward");
  const std::string text = format_terminal_report(back);
  EXPECT_NE(text.find("what the steps achieved"), std::string::npos);
  EXPECT_NE(text.find("MFU"), std::string::npos);
  EXPECT_NE(text.find("per sample"), std::string::npos);
  const std::string html = format_html_report(back);
  EXPECT_NE(html.find("Step time, step by step"), std::string::npos);
  EXPECT_NE(html.find("What the steps achieved"), std::string::npos);
  EXPECT_NE(html.find("MFU"), std::string::npos);
}

}  // namespace
}  // namespace fathom
