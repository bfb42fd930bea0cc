#include "analyze/achievement_derived.h"

#include <fmt/format.h>

#include <map>

#include "analyze/gpu_throughput.h"

namespace fathom {

EnergySummary summarize_energy(const EpochSummary& e, std::optional<double> package_j,
                               const std::string& package_why) {
  EnergySummary s;
  std::optional<double> j;
  if (e.telemetry && e.telemetry->energy_j) {
    s.source = "NVML total energy counter (the GPU)";
    j = e.telemetry->energy_j;
  } else if (package_j) {
    s.source = "RAPL package counters (/sys/class/powercap; the CPU packages)";
    j = package_j;
  }
  if (!j) {
    std::string why = e.telemetry ? std::string("NVML gave no energy counter on this device")
                                  : std::string("no NVML telemetry (no GPU, or NVML absent)");
    why += "; the CPU packages: " + (package_why.empty() ? std::string("not read") : package_why);
    s.not_measured.push_back({"energy", why});
    return s;
  }
  s.epoch_j = j;
  if (e.steps > 0) s.per_step_j = *j / static_cast<double>(e.steps);
  if (e.samples > 0) s.per_sample_j = *j / static_cast<double>(e.samples);
  if (e.wall_ms > 0) s.average_w = *j / (e.wall_ms / 1000.0);
  s.not_measured.push_back(
      {"energy per phase",
       "the counter is read once per epoch (RAPL) or per telemetry sample (NVML), not at phase "
       "boundaries: joules are per epoch, step and sample only"});
  return s;
}

namespace {

// The device's row in the peak table: by compute capability where the report has it, else by name.
const GpuThroughput* device_row(const EpochSummary& e, const Environment& env) {
  if (e.gpu && !e.gpu->devices.empty()) {
    const DeviceProperties& d = e.gpu->devices.front();
    if (const GpuThroughput* r = find_gpu_throughput(d.name, d.compute_major, d.compute_minor))
      return r;
  }
  if (e.mixed_precision && e.mixed_precision->device && e.mixed_precision->device->cuda) {
    const AmpDeviceFacts& d = *e.mixed_precision->device;
    if (const GpuThroughput* r =
            find_gpu_throughput(d.device_name, d.compute_major, d.compute_minor))
      return r;
  }
  const std::string& name = env.device_name;
  for (const GpuThroughput& r : kGpuThroughput)
    if (!r.match.empty() && name.find(r.match) != std::string::npos) return &r;
  if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos)
    return find_gpu_throughput(name, 9, 0);
  return nullptr;
}

}  // namespace

void derive_flops_throughput(FlopsSummary& f, const EpochSummary& e, const Environment& env) {
  if (f.profiled_steps <= 0 || e.steps <= 0) return;
  const bool gpu = env.device.rfind("cuda", 0) == 0;
  std::map<std::string, double> by_phase;
  for (const OpFlops& o : f.by_op) by_phase[o.phase] += o.flops;
  const double steps = static_cast<double>(e.steps);

  std::optional<double> peak;
  if (!gpu) {
    f.not_measured.push_back({"model FLOPs utilization",
                              "no peak FLOP/s is known for CPUs: the achieved FLOP/s is reported, "
                              "the share of a peak is not"});
  } else if (const GpuThroughput* row = device_row(e, env)) {
    double tflops = 0;
    std::string unit;
    if (f.dominant_dtype == "bfloat16") {
      tflops = row->bf16_tflops, unit = "bf16 Tensor Cores";
    } else if (f.dominant_dtype == "float16") {
      tflops = row->fp16_tflops, unit = "fp16 Tensor Cores";
    } else if (f.dominant_dtype == "float32") {
      tflops = row->fp32_tflops, unit = "fp32 CUDA cores";
    }
    if (tflops > 0) {
      peak = tflops * 1e12;
      f.peak = fmt::format(
          "{}, {} dense, {:.1f} TFLOP/s (NVIDIA's data sheet){}", row->name, unit, tflops,
          f.dominant_dtype == "float32" && row->tf32_tflops > 0
              ? fmt::format("; with TF32 allowed, GEMMs can reach {:.0f}", row->tf32_tflops)
              : std::string());
      f.peak_flops_per_s = peak;
    } else {
      f.not_measured.push_back(
          {"model FLOPs utilization",
           fmt::format("no {} peak for {} in fathom's table", f.dominant_dtype, row->name)});
    }
  } else {
    f.not_measured.push_back(
        {"model FLOPs utilization",
         fmt::format("the device ({}) is not in fathom's peak table (gpu_throughput.h)",
                     env.device_name.empty() ? env.device : env.device_name)});
  }

  for (const auto& [name, flops] : by_phase) {
    PhaseThroughput t;
    t.phase = name;
    t.flops_per_step = flops;
    const auto p = phase_from_name(name);
    if (!p) {
      f.achieved.push_back(t);
      continue;
    }
    const PhaseSummary& ps = e.phase(*p);
    if (gpu && ps.device_ms_total) {
      t.seconds_per_step = *ps.device_ms_total / 1000.0 / steps;
      t.time_source = "device";
    } else {
      t.seconds_per_step = ps.wall_ms_total / 1000.0 / steps;
      t.time_source = "wall";
    }
    if (t.seconds_per_step > 0) t.flops_per_s = flops / t.seconds_per_step;
    if (t.flops_per_s && peak) t.mfu = *t.flops_per_s / *peak;
    f.achieved.push_back(t);
  }
  const double step_s = e.step_ms_mean() / 1000.0;
  if (step_s > 0) f.step_flops_per_s = f.per_step / step_s;
  if (f.step_flops_per_s && peak) f.mfu = *f.step_flops_per_s / *peak;
}

}  // namespace fathom
