#include "advise/amp_advice.h"

#include <fathom/gpu_summary.h>
#include <fathom/options.h>
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "advise/advisor.h"
#include "advise/advisor_rules.h"
#include "analyze/gpu_throughput.h"
#include "analyze/tensor_core_analysis.h"
#include "base/thresholds.h"

namespace fathom {
namespace {

void note(std::vector<Unmeasured>& out, std::string what, std::string why) {
  for (const Unmeasured& u : out)
    if (u.what == what) return;
  out.push_back({std::move(what), std::move(why)});
}

std::string percent(double fraction) { return fmt::format("{:.1f} %", 100.0 * fraction); }

// The eligible share of the measured time and where it came from.
struct Eligible {
  double share = 0;    // of the time base below
  double ms = 0;       // eligible time over the epoch
  std::string base;    // what the share is of
  std::string source;  // how the eligible time was measured
  bool upper_bound = false;
};

std::optional<Eligible> from_tensor_cores(const TensorCoreResult& tc,
                                          std::vector<Unmeasured>& not_measured) {
  if (tc.kernel_ns <= 0) return std::nullopt;
  Eligible el;
  el.base = "GPU compute-kernel time";
  if (tc.ops_recorded) {
    el.ms = static_cast<double>(tc.eligible_cuda_core_ns) / 1e6;
    el.share = static_cast<double>(tc.eligible_cuda_core_ns) / static_cast<double>(tc.kernel_ns);
    el.source = "kernels of GEMM and convolution ops that ran on CUDA cores (CUPTI, ATen ops)";
    return el;
  }
  // Without op records every kernel off Tensor Cores may or may not be a GEMM.
  const std::int64_t off = tc.kernel_ns - tc.tensor_core_ns;
  el.ms = static_cast<double>(off) / 1e6;
  el.share = static_cast<double>(off) / static_cast<double>(tc.kernel_ns);
  el.source = "kernels that did not run on Tensor Cores (CUPTI)";
  el.upper_bound = true;
  note(not_measured, "which CUDA-core kernels belong to GEMMs and convolutions",
       "ATen ops were not recorded with the kernels (op correlation off); the share is an upper "
       "bound");
  return el;
}

std::optional<Eligible> from_phases(const EpochSummary& e, std::vector<Unmeasured>& not_measured) {
  if (e.step_ms_total <= 0) return std::nullopt;
  const PhaseSummary& f = e.phase(Phase::Forward);
  const PhaseSummary& b = e.phase(Phase::Backward);
  Eligible el;
  el.base = "step time";
  el.upper_bound = true;
  if (f.device_ms_total || b.device_ms_total) {
    el.ms = f.device_ms_total.value_or(0) + b.device_ms_total.value_or(0);
    el.source = "forward + backward device time (CUDA events)";
  } else {
    el.ms = f.wall_ms_total + b.wall_ms_total;
    el.source = "forward + backward host time";
  }
  el.share = std::min(1.0, el.ms / e.step_ms_total);
  note(not_measured, "FP32 GEMM and convolution time on CUDA cores",
       "no Tensor Core analysis for this run (CUPTI kernel records); the mixed-precision gain is "
       "bounded by the whole forward and backward time");
  return el;
}

// A CPU has no Tensor Cores; its bf16 units (AMX tiles, AVX-512 BF16 dot products) speed up GEMMs
// and convolutions by an amount fathom has no table for. With units: a finding bounded by the
// forward and backward time, and Auto mode to measure it. Without: none (bf16 runs emulated).
std::optional<Finding> cpu_finding(const EpochSummary& e, const AmpDeviceFacts& device,
                                   std::vector<Unmeasured>& not_measured) {
  if (device.cpu_bf16_units.empty()) {
    note(not_measured, "mixed-precision speed-up on CPU",
         (device.cpu_bf16_limit.empty()
              ? std::string("this CPU lists no bf16 units (amx_bf16, avx512_bf16) in /proc/cpuinfo")
              : "this process's kernels may not use the CPU's bf16 units (" +
                    device.cpu_bf16_limit + ")") +
             ": bf16 autocast would run emulated, usually slower than fp32, so fathom neither "
             "suggests nor tries it (Auto mode stays in fp32)");
    return std::nullopt;
  }
  note(not_measured, "mixed-precision speed-up on CPU",
       "fathom has no bf16 and fp32 peak-throughput table for CPUs; Auto mode measures the "
       "speed-up by interleaving fp32 and bf16 steps");
  if (e.step_ms_total <= 0) return std::nullopt;
  const double ms = e.phase(Phase::Forward).wall_ms_total + e.phase(Phase::Backward).wall_ms_total;
  const double share = std::min(1.0, ms / e.step_ms_total);
  if (share < thresholds::kEligibleFp32ShareOfKernels) return std::nullopt;
  std::string units;
  for (const std::string& u : device.cpu_bf16_units) units += (units.empty() ? "" : ", ") + u;
  Finding f;
  f.id = std::string(finding_id::kMixedPrecision);
  f.severity = Severity::Info;
  f.title = "This CPU has bf16 units: forward and backward could run in bf16 (mixed precision)";
  f.evidence = {{"bf16 units (cpuinfo flags)", units},
                {"forward + backward host time (upper bound)",
                 fmt::format("{:.1f} ms, {} of step time", ms, percent(share))}};
  f.why =
      "Under bf16 autocast, GEMMs and convolutions run on the CPU's bf16 units and move half the "
      "bytes, while reductions and losses stay fp32. The gain depends on the shapes and is not "
      "estimated here: Auto mode measures it and keeps bf16 only when the steps are faster.";
  f.estimated_gain = fmt::format(
      "not estimated (no CPU throughput table); bounded by the {} of step time forward and "
      "backward take",
      percent(share));
  f.fix = mixed_precision_fix(false);
  return f;
}

Evidence device_row(const AmpDeviceFacts& device) {
  return {"device", fmt::format("{} (compute capability {}.{})", device.device_name,
                                device.compute_major, device.compute_minor)};
}

Evidence peak_row(const GpuThroughput& row, bool bf16) {
  return {
      "peak throughput",
      fmt::format("{:.0f} TFLOPS {} Tensor Cores vs {:.1f} FP32 ({:.1f}x){} ({} figures)",
                  bf16 ? row.bf16_tflops : row.fp16_tflops, bf16 ? "bf16" : "fp16", row.fp32_tflops,
                  low_precision_ratio(row),
                  row.tf32_tflops > 0
                      ? fmt::format("; TF32 {:.0f} ({:.1f}x over TF32)", row.tf32_tflops,
                                    (bf16 ? row.bf16_tflops : row.fp16_tflops) / row.tf32_tflops)
                      : "",
                  row.name)};
}

}  // namespace

std::string mixed_precision_fix(bool cuda) {
  const char* device = cuda ? "torch::kCUDA" : "torch::kCPU";
  return fmt::format(
      "// let fathom enable it after a warm-up, watch the loss and roll back if it drifts:\n"
      "fathom::Session session(fathom::Options().mode(fathom::Mode::Auto));\n"
      "{{ auto f = step.forward();  loss = criterion(model->forward(x), y); }}  // autocast here\n"
      "{{ auto b = step.backward(); step.scaled(loss).backward(); }}            // scaled for "
      "fp16\n"
      "{{ auto o = step.optimizer(); step.apply(optimizer); }}                  // skips inf/NaN "
      "steps\n"
      "// or by hand (#include <fathom/autocast.h>, <fathom/grad_scaler.h>):\n"
      "fathom::GradScaler scaler;  // needed for fp16 only; bf16 runs without it\n"
      "{{ fathom::AutocastScope autocast({});  loss = criterion(model->forward(x), y); }}\n"
      "scaler.scale(loss).backward();\n"
      "scaler.unscale_(optimizer);  // optional: before clipping\n"
      "scaler.step(optimizer);\n"
      "scaler.update();",
      device);
}

std::optional<Finding> mixed_precision_finding(const EpochSummary& e, const AmpDeviceFacts& device,
                                               const TensorCoreResult* tc,
                                               std::vector<Unmeasured>& not_measured) {
  if (!device.cuda) return cpu_finding(e, device, not_measured);
  if (device.compute_major < thresholds::kTensorCoreMinComputeMajor) {
    note(not_measured, "mixed-precision speed-up",
         fmt::format("compute capability {}.{} has no Tensor Cores", device.compute_major,
                     device.compute_minor));
    return std::nullopt;
  }
  std::optional<Eligible> el = tc ? from_tensor_cores(*tc, not_measured) : std::nullopt;
  if (!el) el = from_phases(e, not_measured);
  if (!el) return std::nullopt;
  if (!el->upper_bound && el->share < thresholds::kEligibleFp32ShareOfKernels) return std::nullopt;

  const GpuThroughput* row =
      find_gpu_throughput(device.device_name, device.compute_major, device.compute_minor);
  const bool bf16 = cuda_supports_bf16(device.compute_major);
  Finding f;
  f.id = std::string(finding_id::kMixedPrecision);
  f.title = fmt::format("FP32 work could run on Tensor Cores in {} (mixed precision)",
                        bf16 ? "bf16" : "fp16");
  f.evidence.push_back(
      {fmt::format("eligible time ({})", el->upper_bound ? "upper bound" : "measured"),
       fmt::format("{:.1f} ms, {} of {}", el->ms, percent(el->share), el->base)});
  f.evidence.push_back({"measured from", el->source});
  if (tc && tc->share)
    f.evidence.push_back({"Tensor Core share of kernel time", percent(*tc->share)});
  if (tc && !tc->on_cuda_cores.empty()) {
    const EligibleOp& op = tc->on_cuda_cores.front();
    f.evidence.push_back(
        {"largest on CUDA cores",
         fmt::format("{} {} ({}), {:.1f} ms", op.op, op.shapes, op.dtypes, op.cuda_core_ns / 1e6)});
  }
  f.evidence.push_back(device_row(device));
  f.why = fmt::format(
      "GEMMs and convolutions in FP32 run on CUDA cores (or TF32 Tensor Cores for convolutions); "
      "autocast runs them in {} on Tensor Cores, with fewer bytes to move, while reductions, "
      "softmax and losses stay in FP32.",
      bf16 ? "bf16" : "fp16 (with a GradScaler against gradient underflow)");
  if (row) {
    const double ratio = low_precision_ratio(*row);
    const double bound = speedup_bound(el->share, ratio);
    f.evidence.push_back(peak_row(*row, bf16));
    f.gain_fraction = el->base == "step time" ? 1.0 - 1.0 / bound : std::optional<double>();
    f.estimated_gain =
        fmt::format("at most {} of {} ({:.2f}x, from peak ratios; real GEMMs reach less)",
                    percent(1.0 - 1.0 / bound), el->base, bound);
    f.severity = 1.0 - 1.0 / bound >= 0.2 ? Severity::Warning : Severity::Info;
  } else {
    note(not_measured, "peak 16-bit and FP32 throughput of this GPU",
         fmt::format("{} (compute capability {}.{}) is not in fathom's table (gpu_throughput.h)",
                     device.device_name, device.compute_major, device.compute_minor));
    f.estimated_gain =
        fmt::format("up to the {} of {} this work takes", percent(el->share), el->base);
    f.severity = Severity::Info;
  }
  f.fix = mixed_precision_fix(true);
  return f;
}

namespace advice {
namespace {

Finding* find(std::vector<Finding>& findings, std::string_view id) {
  for (Finding& f : findings)
    if (f.id == id) return &f;
  return nullptr;
}

Finding rolled_back(const MixedPrecisionSummary& m, const AmpEvent& rollback) {
  Finding f = make_finding(finding_id::kMixedPrecisionRolledBack, Severity::Warning,
                           "fathom turned mixed precision back off");
  f.evidence = {{"at step", std::to_string(rollback.step)}, {"because", rollback.detail}};
  if (m.skipped_steps)
    f.evidence.push_back({"updates skipped on inf/NaN", std::to_string(m.skipped_steps)});
  f.why =
      "Auto mode keeps mixed precision only while the loss stays finite, no step fails under it, "
      "and the watch window's one-sided rank tests do not show the loss above the fp32 trend by "
      "more than the tolerance or the steps slower than fp32 by more than the margin (the "
      "\"because\" row gives the medians, margins and p-values). Training goes on in fp32 from "
      "the current weights.";
  f.fix =
      "// keep fp32; or allow more drift, or force it on and inspect the loss yourself:\n"
      "fathom::configure_amp(session, fathom::AmpOptions().tolerance(0.2));\n"
      "fathom::configure_amp(session, "
      "fathom::AmpOptions().when(fathom::AmpOptions::When::Always));";
  return f;
}

// Mixed precision ran (Auto enabled it, or it was forced on): the GPU rules' finding, if any,
// is marked applied; otherwise a finding says that it runs.
void ran(const MixedPrecisionSummary& m, std::vector<Finding>& out) {
  const Evidence steps{"steps in " + m.dtype,
                       std::to_string(m.steps_low_precision) + " of " +
                           std::to_string(m.steps_low_precision + m.steps_fp32)};
  // Auto's watch: the rank tests' medians, margins and p-values that kept it.
  std::optional<Evidence> kept;
  for (const AmpEvent& e : m.events)
    if (e.kind == AmpEventKind::Accepted) kept = Evidence{"kept because", e.detail};
  if (Finding* existing = find(out, finding_id::kMixedPrecision)) {
    existing->applied = true;
    existing->evidence.push_back(steps);
    if (kept) existing->evidence.push_back(*kept);
    return;
  }
  Finding f =
      make_finding(finding_id::kMixedPrecision, Severity::Info,
                   "fathom runs the forward pass under " + m.dtype + " autocast (mixed precision)");
  f.evidence = {steps, {"state", m.state}};
  if (kept) f.evidence.push_back(*kept);
  if (m.skipped_steps)
    f.evidence.push_back({"updates skipped on inf/NaN", std::to_string(m.skipped_steps)});
  f.why =
      "GEMMs and convolutions run in 16 bits (Tensor Cores on a GPU); losses and reductions "
      "stay fp32.";
  // "on": AmpOptions::When::Always, which has no warm-up to skip.
  f.fix = m.policy == "on" ? std::string()
                           : "// to run it from the first step, without the warm-up:\n"
                             "fathom::configure_amp(session, "
                             "fathom::AmpOptions().when(fathom::AmpOptions::When::Always));";
  f.applied = true;
  out.push_back(std::move(f));
}

// Suggest mode, fp32 throughout: the suggestion with the expected speed-up, merged into the GPU
// rules' finding when they made one.
void suggest(const EpochSummary& e, const AmpDeviceFacts& device, std::vector<Finding>& out,
             std::vector<Unmeasured>& not_measured) {
  const TensorCoreResult* tc = e.gpu && e.gpu->gpu_activity ? &e.gpu->tensor_cores : nullptr;
  std::optional<Finding> f = mixed_precision_finding(e, device, tc, not_measured);
  if (!f) return;
  Finding* existing = find(out, finding_id::kMixedPrecision);
  if (!existing) {
    out.push_back(std::move(*f));
    return;
  }
  // The GPU rules found it first: add the device and its peak throughput (the rows the CUDA
  // suggestion has) and fathom's way to enable it.
  if (device.cuda) {
    existing->evidence.push_back(device_row(device));
    if (const GpuThroughput* row =
            find_gpu_throughput(device.device_name, device.compute_major, device.compute_minor))
      existing->evidence.push_back(peak_row(*row, cuda_supports_bf16(device.compute_major)));
  }
  if (existing->estimated_gain.empty()) existing->estimated_gain = f->estimated_gain;
  existing->fix += "\n// with fathom:\n" + f->fix;
}

}  // namespace

void mixed_precision_actions(const EpochSummary& e, const Environment& env,
                             std::vector<Finding>& out, std::vector<Unmeasured>& not_measured) {
  if (!e.mixed_precision) return;
  const MixedPrecisionSummary& m = *e.mixed_precision;
  const AmpEvent* rollback = nullptr;
  for (const AmpEvent& ev : m.events)
    if (ev.kind == AmpEventKind::RolledBack) rollback = &ev;
  if (rollback) {
    out.push_back(rolled_back(m, *rollback));
  } else if (m.steps_low_precision > 0) {
    ran(m, out);
  } else if (env.mode == Mode::Suggest && m.device) {
    // Auto mode decides by running it (amp_policy.h); only Suggest mode suggests it.
    suggest(e, *m.device, out, not_measured);
  }
}

}  // namespace advice
}  // namespace fathom
