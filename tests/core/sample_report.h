#pragma once
// A small, fully specified report for the writer tests.
#include <fathom/report.h>

namespace fathom::test {

inline RunReport sample_report() {
  RunReport r;
  r.run_name = "sample";
  Environment& env = r.environment;
  env.fathom_version = "0.1.0";
  env.torch_version = "2.11.0";
  env.device = "cuda:0";
  env.device_name = "NVIDIA H200";
  env.device_memory_bytes = 150'000'000'000LL;
  env.hostname = "host";
  env.pid = 42;
  env.started_at = "2026-11-30T00:00:00Z";
  env.mode = "suggest";
  env.nvtx = "modules";
  env.not_measured = {
      {"GPU kernels (CUPTI)", "CUPTI busy: another profiler holds it", UnmeasuredId::GpuActivity}};
  EpochSummary e;
  e.index = 0;
  e.steps = 10;
  e.samples = 640;
  e.wall_ms = 1000;
  e.step_ms_total = 800;
  e.step_ms_max = 95;
  for (Phase p : kAllPhases) e.phases[static_cast<std::size_t>(p)].phase = p;
  auto& data = e.phases[0];
  data.count = 10;
  data.inferred = true;
  data.wall_ms_total = 200;
  data.wall_ms_max = 30;
  auto& fwd = e.phases[2];
  fwd.count = 10;
  fwd.wall_ms_total = 300;
  fwd.wall_ms_max = 35;
  fwd.device_ms_total = 280;
  fwd.device_memory = DeviceMemoryPeak{1 << 30, 2LL << 30, 1, 0};
  e.device_memory = fwd.device_memory;
  e.copies.push_back(CopySummary{CopyDirection::HostToDevice, false, false, 10, 10 << 20, 12.5});
  Finding f;
  f.id = "data.loader_bound";
  f.severity = Severity::Warning;
  f.title = "Training waits on data loading";
  f.evidence = {{"data time share", "20.0 %"}};
  f.why = "why";
  f.estimated_gain = "up to 20.0 % of step time";
  f.gain_fraction = 0.2;
  f.fix = "line one\nline two";
  e.findings.push_back(f);
  r.epochs.push_back(e);
  return r;
}

}  // namespace fathom::test
