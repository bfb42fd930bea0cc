#include <fathom/gpu_aggregator.h>
#include <fathom/tensor_core_analysis.h>

#include <algorithm>

namespace fathom {
namespace {

std::optional<double> ratio(std::int64_t part, std::int64_t whole) {
  if (whole <= 0) return std::nullopt;
  return static_cast<double>(part) / static_cast<double>(whole);
}

EligibleOp eligible_op(const EligibleOpStats& s) {
  return EligibleOp{s.name,      s.shapes,          s.dtypes,         s.misaligned,
                    s.instances, s.only_cuda_cores, s.tensor_core_ns, s.cuda_core_ns};
}

}  // namespace

TensorCoreResult analyze_tensor_cores(const GpuAggregate& a) {
  TensorCoreResult r;
  for (const KernelStats& k : a.kernels) {
    if (k.kind.communication) continue;
    r.kernel_count += k.count;
    r.kernel_ns += k.total_ns;
    if (k.kind.tensor_core) {
      r.tensor_core_count += k.count;
      r.tensor_core_ns += k.total_ns;
    }
    auto f = std::find_if(r.families.begin(), r.families.end(),
                          [&](const KernelFamilyTime& x) { return x.family == k.kind.family; });
    if (f == r.families.end()) {
      r.families.push_back({std::string(k.kind.family), k.kind.tensor_core});
      f = r.families.end() - 1;
    }
    f->count += k.count;
    f->total_ns += k.total_ns;
  }
  r.share = ratio(r.tensor_core_ns, r.kernel_ns);
  std::stable_sort(
      r.families.begin(), r.families.end(),
      [](const KernelFamilyTime& x, const KernelFamilyTime& y) { return x.total_ns > y.total_ns; });

  for (std::size_t i = 0; i < kPhaseBuckets; ++i) {
    const PhaseGpuStats& p = a.phases[i];
    const std::int64_t compute = p.kernel_ns - p.communication_ns;
    if (compute <= 0) continue;
    const std::string name =
        i == kUnattributed ? "unattributed" : std::string(phase_name(kAllPhases[i]));
    r.phases.push_back({name, compute, p.tensor_core_ns, ratio(p.tensor_core_ns, compute)});
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
                             k.count, k.total_ns});
  }

  r.ops_recorded = !a.eligible_ops.empty();
  std::vector<EligibleOp> on_cuda, misaligned;
  for (const EligibleOpStats& s : a.eligible_ops) {
    r.eligible_instances += s.instances;
    r.eligible_with_kernels += s.with_kernels;
    r.eligible_only_cuda_cores += s.only_cuda_cores;
    r.eligible_cuda_core_ns += s.cuda_core_ns;
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

}  // namespace fathom
