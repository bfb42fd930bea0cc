#include "analyze/tensor_core_analysis.h"

#include <fmt/format.h>

#include <algorithm>

#include "aggregate/gpu_aggregator.h"

namespace fathom {
namespace {

std::optional<double> ratio(std::int64_t part, std::int64_t whole) {
  if (whole <= 0) return std::nullopt;
  return static_cast<double>(part) / static_cast<double>(whole);
}

void add(DecidedTime& t, std::int64_t count, std::int64_t ns) {
  t.count += count;
  t.ns += ns;
}

EligibleOp eligible_op(const EligibleOpStats& s) {
  return EligibleOp{s.name,      s.shapes,          s.dtypes,         s.misaligned,
                    s.instances, s.only_cuda_cores, s.tensor_core_ns, s.cuda_core_ns};
}

// A kernel's launches by decision: the name's verdict, or for an undecided name those an op
// decided and the rest.
void count_decisions(TensorCoreDecisions& d, const KernelStats& k) {
  if (k.kind.decision != Decision::Unknown) {
    add(k.kind.tensor_core ? d.tensor_cores_by_name : d.cuda_cores_by_name, k.count, k.total_ns);
    return;
  }
  add(d.tensor_cores_by_op, k.tensor_core_by_op_count, k.tensor_core_by_op_ns);
  const std::int64_t count = k.count - k.tensor_core_by_op_count;
  const std::int64_t ns = k.total_ns - k.tensor_core_by_op_ns;
  add(d.unknown, count, ns);
  if (k.kind.needs_capability) add(d.unknown_without_capability, count, ns);
}

}  // namespace

TensorCoreResult analyze_tensor_cores(const GpuAggregate& a) {
  TensorCoreResult r;
  for (const KernelStats& k : a.kernels) {
    if (k.kind.communication) continue;
    r.kernel_count += k.count;
    r.kernel_ns += k.total_ns;
    count_decisions(r.decisions, k);
    const std::string decision(decision_name(k.kind.decision));
    auto f = std::find_if(r.families.begin(), r.families.end(), [&](const KernelFamilyTime& x) {
      return x.family == k.kind.family && x.tensor_core == k.kind.tensor_core &&
             x.decision == decision;
    });
    if (f == r.families.end()) {
      r.families.push_back({std::string(k.kind.family), k.kind.tensor_core, 0, 0, decision});
      f = r.families.end() - 1;
    }
    f->count += k.count;
    f->total_ns += k.total_ns;
    f->tensor_core_by_op_ns += k.tensor_core_by_op_ns;
  }
  const TensorCoreDecisions& d = r.decisions;
  r.tensor_core_count = d.tensor_cores_by_name.count + d.tensor_cores_by_op.count;
  r.tensor_core_ns = d.tensor_cores_by_name.ns + d.tensor_cores_by_op.ns;
  r.share = ratio(r.tensor_core_ns, r.kernel_ns);
  r.unknown_share = ratio(d.unknown.ns, r.kernel_ns);
  r.op_dtypes_recorded = a.op_dtypes_recorded;
  std::stable_sort(
      r.families.begin(), r.families.end(),
      [](const KernelFamilyTime& x, const KernelFamilyTime& y) { return x.total_ns > y.total_ns; });

  for (std::size_t i = 0; i < kPhaseBuckets; ++i) {
    const PhaseGpuStats& p = a.phases[i];
    const std::int64_t compute = p.kernel_ns - p.communication_ns;
    if (compute <= 0) continue;
    const std::string name =
        i == kUnattributed ? "unattributed" : std::string(phase_name(kAllPhases[i]));
    r.phases.push_back(
        {name, compute, p.tensor_core_ns, ratio(p.tensor_core_ns, compute), p.unknown_ns});
  }

  std::vector<const KernelStats*> by_time;
  for (const KernelStats& k : a.kernels) by_time.push_back(&k);
  std::stable_sort(by_time.begin(), by_time.end(), [](const KernelStats* x, const KernelStats* y) {
    return x->total_ns > y->total_ns;
  });
  for (std::size_t i = 0; i < by_time.size() && i < kTopKernels; ++i) {
    const KernelStats& k = *by_time[i];
    r.top_kernels.push_back({k.name, std::string(k.kind.family), k.kind.tensor_core,
                             k.kind.communication, std::string(precision_name(k.kind.precision)),
                             k.count, k.total_ns, std::string(decision_name(k.kind.decision)),
                             k.tensor_core_by_op_ns});
  }

  r.ops_recorded = !a.eligible_ops.empty();
  std::vector<EligibleOp> on_cuda, misaligned;
  for (const EligibleOpStats& s : a.eligible_ops) {
    r.eligible_instances += s.instances;
    r.eligible_with_kernels += s.with_kernels;
    r.eligible_only_cuda_cores += s.only_cuda_cores;
    r.eligible_cuda_core_ns += s.cuda_core_ns;
    r.eligible_unknown_ns += s.unknown_ns;
    if (s.only_cuda_cores > 0) on_cuda.push_back(eligible_op(s));
    if (!s.misaligned.empty() && s.with_kernels > 0) misaligned.push_back(eligible_op(s));
  }
  std::stable_sort(on_cuda.begin(), on_cuda.end(), [](const EligibleOp& x, const EligibleOp& y) {
    return x.cuda_core_ns > y.cuda_core_ns;
  });
  std::stable_sort(
      misaligned.begin(), misaligned.end(),
      [](const EligibleOp& x, const EligibleOp& y) { return x.instances > y.instances; });
  if (on_cuda.size() > kTopOps) on_cuda.resize(kTopOps);
  if (misaligned.size() > kTopOps) misaligned.resize(kTopOps);
  r.on_cuda_cores = std::move(on_cuda);
  r.misaligned = std::move(misaligned);
  return r;
}

std::string undecided_kernels_note(const TensorCoreResult& r) {
  if (!r.unknown_share || *r.unknown_share <= kUnknownShareNotable) return {};
  std::string note = fmt::format(
      "{:.1f}% of compute-kernel time is in kernels whose names say neither Tensor Cores nor CUDA "
      "cores (counted as unknown, not as CUDA cores)",
      100 * *r.unknown_share);
  if (r.decisions.unknown_without_capability.ns > 0)
    note +=
        "; the source does not give the device's compute capability, which decides the fused "
        "attention kernels among them";
  if (!r.op_dtypes_recorded)
    note +=
        "; FATHOM_RECORD_SHAPES=on (Options::record_shapes; record_shapes=True in "
        "torch.profiler) records the input types of the GEMM, convolution and attention ops, so "
        "fathom can decide their kernels by op";
  else
    note +=
        "; the ops that launched them do not decide it either (no GEMM, convolution or "
        "attention op with 16- or 8-bit inputs on sm_80+)";
  return note;
}

}  // namespace fathom
