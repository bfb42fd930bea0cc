#include "base/annotation_roles.h"

namespace fathom {
namespace {

bool starts_with(std::string_view s, std::string_view p) noexcept {
  return s.substr(0, p.size()) == p;
}
bool has(std::string_view s, std::string_view p) noexcept {
  return s.find(p) != std::string_view::npos;
}

AnnotationMeaning phase(Phase p) noexcept { return {AnnotationRole::Phase, p}; }

// An autograd node as the profiler names it: CudnnConvolutionBackward, ReluBackward1,
// MmBackward0 (a C++ class name, no namespace), or the gradient accumulator.
bool autograd_node(std::string_view name) noexcept {
  if (name == "torch::autograd::AccumulateGrad") return true;
  if (name.find("::") != std::string_view::npos || name.find(' ') != std::string_view::npos)
    return false;
  while (!name.empty() && name.back() >= '0' && name.back() <= '9') name.remove_suffix(1);
  constexpr std::string_view kSuffix = "Backward";
  return name.size() > kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix &&
         name.front() >= 'A' && name.front() <= 'Z';
}

}  // namespace

AnnotationMeaning annotation_meaning(std::string_view name) noexcept {
  // fathom's scopes (NVTX ranges and the session's phase names).
  if (name == "step" || starts_with(name, "step ") || starts_with(name, "step#"))
    return {AnnotationRole::Step, Phase::Data};
  if (auto p = phase_from_name(name)) return phase(*p);
  // PyTorch profiler (torch.profiler.schedule marks each step; the DataLoader and optimizers
  // record their own functions; HTA's sample traces use "## name ##" user annotations).
  if (starts_with(name, "ProfilerStep#")) return {AnnotationRole::Step, Phase::Data};
  if (starts_with(name, "enumerate(DataLoader)") || has(name, "## data_load"))
    return phase(Phase::Data);
  if (starts_with(name, "Optimizer.")) return phase(Phase::Optimizer);
  if (has(name, "## forward ##") || name == "DistributedDataParallel.forward")
    return phase(Phase::Forward);
  if (has(name, "## backward ##") || starts_with(name, "autograd::engine::evaluate_function") ||
      autograd_node(name))
    return phase(Phase::Backward);
  return {};
}

AnnotationRecord classified_annotation(std::string name, std::uint64_t thread,
                                       std::int64_t start_ns, std::int64_t end_ns) {
  const AnnotationMeaning m = annotation_meaning(name);
  return AnnotationRecord{std::move(name), thread, start_ns, end_ns, m.role, m.phase};
}

}  // namespace fathom
