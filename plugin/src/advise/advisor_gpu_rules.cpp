// Rules on what the GPU did (CUPTI records or a profiler trace, summarised in GpuSummary):
// Tensor Core use, transfers against the link, host synchronizations, launch-bound steps and
// communication.
#include <fathom/gpu_summary.h>

#include <algorithm>

#include "advise/advisor_rules.h"
#include "analyze/timeline_analysis.h"
#include "analyze/transfer_analysis.h"
#include "base/thresholds.h"

namespace fathom::advice {
namespace {

std::string ms(std::int64_t ns) { return fmt::format("{:.2f} ms", ns / 1e6); }

double share_of(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// The lowest compute capability among the devices the source names; 0 when none does.
int min_compute_major(const GpuSummary& g) {
  int m = 0;
  for (const DeviceProperties& d : g.devices)
    if (d.compute_major > 0) m = m ? std::min(m, d.compute_major) : d.compute_major;
  return m;
}

std::optional<double> mean_busy_share(const TimelineResult& t) {
  double sum = 0;
  int n = 0;
  for (const DeviceTimeline& d : t.devices)
    if (d.busy_share) sum += *d.busy_share, ++n;
  return n ? std::optional<double>(sum / n) : std::nullopt;
}

Finding* existing(std::vector<Finding>& out, std::string_view id) {
  for (Finding& f : out)
    if (f.id == id) return &f;
  return nullptr;
}

void mixed_precision(const EpochSummary& e, const GpuSummary& g, std::vector<Finding>& out) {
  const TensorCoreResult& tc = g.tensor_cores;
  if (tc.kernel_ns <= 0) return;
  const int major = min_compute_major(g);
  if (major > 0 && major < thresholds::kTensorCoreMinComputeMajor) return;  // no Tensor Cores
  const double eligible = share_of(tc.eligible_cuda_core_ns, tc.kernel_ns);
  // Unknown kernels are not CUDA-core kernels: the low share is judged on the decided time, and
  // only while the undecided part is too small to hide the matrix work.
  const std::int64_t unknown_ns = tc.decisions.unknown.ns;
  const std::int64_t cuda_ns = tc.decisions.cuda_cores_by_name.ns;
  const auto decided_share = share_of(tc.tensor_core_ns, tc.tensor_core_ns + cuda_ns);
  const bool low_share = cuda_ns > 0 && decided_share < thresholds::kTensorCoreShareLow &&
                         share_of(unknown_ns, tc.kernel_ns) < thresholds::kTensorCoreShareLow;
  const bool eligible_fp32 = tc.ops_recorded && eligible > thresholds::kEligibleFp32ShareOfKernels;
  // With ops recorded, a low share alone is not enough: the model may have no GEMM to speak of.
  if (!(eligible_fp32 || (low_share && !tc.ops_recorded))) return;
  const bool already_amp = e.footprint && e.footprint->mixed_precision;
  Finding f =
      make_finding(finding_id::kMixedPrecision, Severity::Warning,
                   already_amp ? "Tensor-Core-eligible work still runs in FP32 under autocast"
                               : "Matrix work runs on CUDA cores, not Tensor Cores");
  f.evidence.push_back({"Tensor Core share of kernel time", tc.share ? percent(*tc.share) : "-"});
  if (unknown_ns > 0)
    f.evidence.push_back(
        {"undecided (kernel names say neither)",
         fmt::format("{} of kernel time", percent(share_of(unknown_ns, tc.kernel_ns)))});
  if (tc.ops_recorded) {
    f.evidence.push_back({"eligible ops only on CUDA cores",
                          fmt::format("{} of {} ({} of kernel time)", tc.eligible_only_cuda_cores,
                                      tc.eligible_instances, percent(eligible))});
    if (!tc.on_cuda_cores.empty()) {
      const EligibleOp& op = tc.on_cuda_cores.front();
      f.evidence.push_back({"largest", fmt::format("{} {} {} ({} on CUDA cores)", op.op, op.shapes,
                                                   op.dtypes, ms(op.cuda_core_ns))});
    }
    if (!tc.misaligned.empty())
      f.evidence.push_back(
          {"dims not multiples of 8",
           fmt::format("{} {} ({})", tc.misaligned.front().op, tc.misaligned.front().shapes,
                       tc.misaligned.front().misaligned)});
  }
  if (major > 0) f.evidence.push_back({"compute capability", fmt::format("{}.x", major)});
  f.why =
      "Tensor Cores run FP16 / BF16 (and TF32) matrix math several times faster than CUDA cores "
      "run FP32; autocast moves GEMMs and convolutions onto them.";
  const std::int64_t window = g.timeline.window_ns;
  const std::int64_t on_cuda = tc.ops_recorded ? tc.eligible_cuda_core_ns : cuda_ns;
  if (window > 0) {
    f.gain_fraction = std::min(1.0, share_of(on_cuda, window));
    f.estimated_gain = fmt::format(
        "most of {} of step time (FP32 matrix work that Tensor Cores run several times faster)",
        percent(*f.gain_fraction));
  } else {
    f.estimated_gain = fmt::format("most of {} of CUDA-core kernel time", ms(on_cuda));
  }
  f.fix =
      "// bf16 autocast around forward (compute capability >= 8.0; fp16 + GradScaler before):\n"
      "{ auto fwd = step.forward();\n"
      "  at::autocast::set_autocast_enabled(at::kCUDA, true);\n"
      "  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);\n"
      "  loss = criterion(model->forward(x), y);\n"
      "  at::autocast::set_autocast_enabled(at::kCUDA, false);\n"
      "  at::autocast::clear_cache(); }\n"
      "// or: fathom::Options().mode(fathom::Mode::Auto); and TF32 for what stays fp32:\n"
      "at::globalContext().setAllowTF32CuBLAS(true);";
  if (!tc.misaligned.empty()) f.fix += "\n// pad feature / hidden sizes to multiples of 8";
  out.push_back(std::move(f));
}

void transfers(const GpuSummary& g, std::vector<Finding>& out) {
  const TransferResult& t = g.transfers;
  // Bandwidth far below the link's peak, for copies large enough to measure it.
  for (const TransferDirection& d : t.directions) {
    if (d.direction != MemcpyKind::HostToDevice && d.direction != MemcpyKind::DeviceToHost)
      continue;
    if (!d.share_of_peak || !d.gb_per_s || d.count == 0) continue;
    if (d.bytes / d.count < thresholds::kTransferMinBytesForBandwidth) continue;
    if (*d.share_of_peak >= thresholds::kTransferShareOfLinkPeak) continue;
    if (existing(out, finding_id::kTransferBelowLinkPeak)) break;
    Finding f = make_finding(finding_id::kTransferBelowLinkPeak, Severity::Warning,
                             "Copies reach a fraction of the link's bandwidth");
    f.evidence = {{"direction", std::string(memcpy_kind_name(d.direction))},
                  {"achieved", fmt::format("{:.2f} GB/s over {} copies, {}", *d.gb_per_s, d.count,
                                           bytes_text(d.bytes))},
                  {"link", t.link.description},
                  {"share of peak", percent(*d.share_of_peak)},
                  {"pageable copies",
                   fmt::format("{} ({})", d.pageable_count, bytes_text(d.pageable_bytes))}};
    f.why =
        "Pageable host memory goes through a staging buffer; otherwise the link itself may run "
        "slower than it should (a slot wired for fewer lanes or an older generation) or other "
        "traffic shares it.";
    f.estimated_gain =
        fmt::format("copies up to {:.1f}x faster", 1.0 / std::max(*d.share_of_peak, 0.01));
    f.fix =
        "auto x = step.to_device(batch.data.pin_memory(), device, /*non_blocking=*/true);\n"
        "# then check the link under load, and prefer NVLink for GPU-to-GPU traffic:\n"
        "nvidia-smi -q -d PCI | grep -A3 -E 'Link (Gen|Width)';  nvidia-smi nvlink -s";
    out.push_back(std::move(f));
  }
  // Pageable and synchronous copies seen by CUPTI: the same findings as fathom's copy helper
  // reports, with the device's view added.
  if (t.pageable_async_count >= thresholds::kPageableAsyncCopies) {
    Finding* f = existing(out, finding_id::kCopyPageable);
    if (!f) {
      out.push_back(
          make_finding(finding_id::kCopyPageable, Severity::Warning,
                       "Asynchronous copies read pageable memory (they run synchronously)"));
      f = &out.back();
      f->why =
          "cudaMemcpyAsync from pageable memory is staged through a pinned buffer and blocks the "
          "host: it neither overlaps with compute nor runs at the link's speed.";
      f->estimated_gain = "overlap of copies with compute, and faster copies";
      f->fix =
          "torch::data::DataLoaderOptions().batch_size(bs).workers(4)  // then, per batch:\n"
          "auto x = step.to_device(batch.data.pin_memory(), device, /*non_blocking=*/true);";
    }
    f->evidence.push_back({"async copies from pageable memory (GPU records)",
                           fmt::format("{}", t.pageable_async_count)});
  }
  if (t.large_sync_h2d_count > 0) {
    Finding* f = existing(out, finding_id::kCopySynchronous);
    if (!f) {
      out.push_back(make_finding(finding_id::kCopySynchronous, Severity::Info,
                                 "Large host-to-device copies are synchronous"));
      f = &out.back();
      f->why = "A synchronous copy blocks the host until it is done, so it cannot queue more work.";
      f->estimated_gain = "the host keeps queueing work during copies";
      f->fix =
          "auto next = step.to_device(batch.data.pin_memory(), device, /*non_blocking=*/true);";
    }
    f->evidence.push_back({fmt::format("synchronous host-to-device copies above {} (GPU records)",
                                       bytes_text(thresholds::kSyncCopyBytes)),
                           fmt::format("{}", t.large_sync_h2d_count)});
  }
  // Copies that take a real share of the step and mostly do not overlap with kernels.
  if (t.share_of_window && *t.share_of_window > thresholds::kTransferShareOfStep &&
      t.overlap_share.value_or(0) < 0.5) {
    Finding f =
        make_finding(finding_id::kTransferExposed, Severity::Warning,
                     "Host-device copies take a share of the step and do not overlap compute");
    f.evidence = {{"copy time share of the step", percent(*t.share_of_window)},
                  {"overlapped with kernels", t.overlap_share ? percent(*t.overlap_share) : "-"},
                  {"copies", fmt::format("{} ({})", t.count, bytes_text(t.bytes))}};
    f.why =
        "While a copy runs alone the GPU computes nothing; the next batch can travel during this "
        "one.";
    f.gain_fraction = *t.share_of_window * (1.0 - t.overlap_share.value_or(0));
    f.estimated_gain = fmt::format("up to {} of step time", percent(*f.gain_fraction));
    f.fix =
        "// prefetch: copy batch i+1 on a side stream while batch i computes\n"
        "auto side = c10::cuda::getStreamFromPool();\n"
        "{ c10::cuda::CUDAStreamGuard guard(side);\n"
        "  next = step.to_device(next_batch.pin_memory(), device, /*non_blocking=*/true); }\n"
        "c10::cuda::getCurrentCUDAStream().wait_stream(side);  // before using next";
    out.push_back(std::move(f));
  }
}

void host_sync(const GpuSummary& g, std::vector<Finding>& out) {
  const TimelineResult& t = g.timeline;
  if (t.window_ns <= 0) return;
  const auto [count, sync_ns] = host_syncs(t);
  std::int64_t idle_sync = 0;
  for (const DeviceTimeline& d : t.devices) idle_sync = std::max(idle_sync, d.idle.sync_ns);
  const double share = share_of(std::max(sync_ns, idle_sync), t.window_ns);
  if (count == 0 || share <= thresholds::kHostSyncShareOfStep) return;
  Finding f = make_finding(finding_id::kHostSync, Severity::Warning,
                           "The host waits for the GPU inside the step");
  f.evidence = {{"synchronizations", t.steps > 0 ? fmt::format("{} ({:.1f} per step)", count,
                                                               static_cast<double>(count) / t.steps)
                                                 : fmt::format("{}", count)},
                {"host time blocked", fmt::format("{} ({} of the window)", ms(sync_ns),
                                                  percent(share_of(sync_ns, t.window_ns)))},
                {"GPU idle while the host synced", ms(idle_sync)}};
  f.why =
      "Each wait drains the GPU's queue: the host cannot launch the next kernels ahead, so the "
      "GPU idles while they are launched. .item(), .cpu(), printing a tensor and "
      "synchronous copies all wait.";
  f.gain_fraction = share;
  f.estimated_gain = fmt::format("up to {} of step time", percent(share));
  f.fix =
      "// keep running values on the device; read them once per epoch, not per step\n"
      "running_loss += loss.detach();          // instead of loss.item()\n"
      "...\n"
      "std::cout << running_loss.item<float>() / steps;  // at epoch end";
  out.push_back(std::move(f));
}

void launch_bound(const GpuSummary& g, std::vector<Finding>& out) {
  const TimelineResult& t = g.timeline;
  const auto busy = mean_busy_share(t);
  if (!t.tiny_count_share || !busy) return;
  if (*t.tiny_count_share <= thresholds::kTinyKernelShare ||
      *busy >= thresholds::kLaunchBoundBusyShare)
    return;
  std::int64_t late = 0;
  for (const DeviceTimeline& d : t.devices) late = std::max(late, d.idle.host_launch_ns);
  Finding f = make_finding(finding_id::kLaunchBound, Severity::Warning,
                           "Steps are launch-bound: many tiny kernels, GPU waiting for the next");
  f.evidence = {{"kernels", t.steps > 0 ? fmt::format("{} ({:.0f} per step)", t.kernel_count,
                                                      static_cast<double>(t.kernel_count) / t.steps)
                                        : fmt::format("{}", t.kernel_count)},
                {fmt::format("shorter than {:.0f} us", thresholds::kTinyKernelNs / 1e3),
                 percent(*t.tiny_count_share)},
                {"GPU busy", percent(*busy)}};
  if (t.launches_recorded) f.evidence.push_back({"GPU idle waiting for launches", ms(late)});
  f.why =
      "Each launch costs the host a few microseconds; when kernels are shorter than that the GPU "
      "finishes them faster than the host can queue them.";
  f.gain_fraction =
      std::min(1.0 - *busy, t.window_ns > 0 ? share_of(late, t.window_ns) : 1.0 - *busy);
  f.estimated_gain = fmt::format("up to {} of step time", percent(*f.gain_fraction));
  f.fix =
      "// capture the step once and replay it: one launch for all kernels\n"
      "at::cuda::CUDAGraph graph;\n"
      "{ c10::cuda::CUDAStreamGuard g(c10::cuda::getStreamFromPool()); graph.capture_begin();\n"
      "  loss = criterion(model->forward(static_x), static_y); loss.backward();\n"
      "  graph.capture_end(); }\n"
      "graph.replay();  // per step, after copying the batch into static_x / static_y\n"
      "// or a larger batch: the same launches do more work each";
  out.push_back(std::move(f));
}

void communication(const GpuSummary& g, std::vector<Finding>& out) {
  const TimelineResult& t = g.timeline;
  if (t.communication_kernels == 0 || !t.communication_share) return;
  std::int64_t comm = 0, overlap = 0;
  for (const DeviceTimeline& d : t.devices)
    comm += d.communication_ns, overlap += d.communication_overlap_ns;
  const bool overlap_known = comm > 0;
  const double overlap_share = overlap_known ? share_of(overlap, comm) : 0.0;
  const double share = *t.communication_share;
  const bool large = share > thresholds::kCommunicationShareOfStep;
  const bool exposed = overlap_known && (overlap_share < thresholds::kCommunicationOverlapLow) &&
                       (share > thresholds::kCommunicationShareOfStep / 2);
  if (!large && !exposed) return;
  Finding f = make_finding(finding_id::kCommunication,
                           large && exposed ? Severity::Critical : Severity::Warning,
                           "Communication takes a large share of the step");
  f.evidence = {
      {"communication share of the step", percent(*t.communication_share)},
      {"overlapped with compute", overlap_known ? percent(overlap_share) : "-"},
      {"NCCL kernels", fmt::format("{} ({})", t.communication_kernels, ms(t.communication_ns))}};
  f.why =
      "Gradient all-reduce that does not overlap with backward leaves the GPUs waiting on the "
      "network; fewer, larger exchanges and overlap hide it.";
  f.gain_fraction = share * (1.0 - overlap_share);
  f.estimated_gain = fmt::format("up to {} of step time", percent(*f.gain_fraction));
  f.fix =
      "// start each bucket's all-reduce as soon as its gradients are ready (overlap with "
      "backward),\n"
      "// and all-reduce every k steps with gradient accumulation:\n"
      "for (int micro = 0; micro < k; ++micro) { /* forward + backward, no all-reduce */ }\n"
      "all_reduce_gradients(model);  optimizer.step();\n"
      "// or a larger batch per GPU: the same exchange per more samples";
  out.push_back(std::move(f));
}

}  // namespace

void gpu_rules(const EpochSummary& e, const GpuSummary& g, std::vector<Finding>& out) {
  if (!g.gpu_activity) return;
  mixed_precision(e, g, out);
  transfers(g, out);
  host_sync(g, out);
  launch_bound(g, out);
  communication(g, out);
}

std::optional<BusyShare> timeline_busy_share(const GpuSummary& g) {
  if (!g.gpu_activity) return std::nullopt;
  const auto busy = mean_busy_share(g.timeline);
  if (!busy) return std::nullopt;
  return BusyShare{*busy, "GPU records: kernel, copy and memset time over the steps"};
}

}  // namespace fathom::advice
