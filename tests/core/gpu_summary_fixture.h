#pragma once
// A GPU section as the analyses would write it for a small run, for the report writer tests.
#include <fathom/gpu_summary.h>

namespace fathom::test {

inline GpuSummary gpu_summary_fixture() {
  constexpr std::int64_t ms = 1'000'000;
  GpuSummary g;
  g.source = "cupti";
  g.gpu_activity = true;
  g.devices.push_back({0, "NVIDIA H100 80GB HBM3", 9, 0, 80LL << 30});
  TensorCoreResult& tc = g.tensor_cores;
  tc.kernel_count = 1200;
  tc.kernel_ns = 800 * ms;
  tc.tensor_core_ns = 200 * ms;
  tc.share = 0.25;
  tc.decisions.tensor_cores_by_name = {200, 150 * ms};
  tc.decisions.tensor_cores_by_op = {100, 50 * ms};
  tc.decisions.cuda_cores_by_name = {800, 500 * ms};
  tc.decisions.unknown = {100, 100 * ms};
  tc.unknown_share = 0.125;
  tc.op_dtypes_recorded = true;
  tc.phases = {{"forward", 300 * ms, 100 * ms, 1.0 / 3, 40 * ms},
               {"backward", 500 * ms, 100 * ms, 0.2, 60 * ms}};
  tc.top_kernels = {
      {"sm90_xmma_gemm_f32f32_<float>_\"ffma\"", "xmma_f32", false, false, "fp32", 400, 300 * ms},
      {"nvjet_tst_128x256_bf16", "nvjet", true, false, "bf16", 200, 200 * ms}};
  tc.ops_recorded = true;
  tc.eligible_instances = 60;
  tc.eligible_only_cuda_cores = 40;
  tc.eligible_cuda_core_ns = 300 * ms;
  EligibleOp op;
  op.op = "aten::addmm<script>";
  op.shapes = "[[256, 1000], [1000, 1000]]";
  op.dtypes = "float";
  op.instances = 40;
  op.only_cuda_cores = 40;
  op.cuda_core_ns = 300 * ms;
  tc.on_cuda_cores.push_back(op);
  TransferResult& t = g.transfers;
  t.link = {31.5, "PCIe gen4 x16"};
  TransferDirection h2d;
  h2d.direction = MemcpyKind::HostToDevice;
  h2d.count = 20;
  h2d.bytes = 400LL << 20;
  h2d.total_ns = 100 * ms;
  h2d.gb_per_s = 4.19;
  h2d.share_of_peak = 4.19 / 31.5;
  t.directions.push_back(h2d);
  t.window_ns = 1000 * ms;
  t.share_of_window = 0.1;
  t.overlap_share = 0.2;
  TimelineResult& tl = g.timeline;
  tl.window_ns = 1000 * ms;
  tl.steps = 10;
  DeviceTimeline d;
  d.busy_ns = 600 * ms;
  d.idle_ns = 400 * ms;
  d.busy_share = 0.6;
  d.idle = {150 * ms, 100 * ms, 100 * ms, 50 * ms, 40};
  tl.devices.push_back(d);
  return g;
}

}  // namespace fathom::test
