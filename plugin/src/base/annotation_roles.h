#pragma once
// What a host annotation means for the GPU analyses: a training step (the wall clock the
// timeline is measured against) or a phase (what GPU work launched inside it is attributed to).
// fathom's own names come first; PyTorch profiler names (ProfilerStep#N, DataLoader,
// Optimizer.step, autograd's evaluate_function) let the same analyses read a Kineto trace.
#include <fathom/gpu_records.h>
#include <fathom/phase.h>

#include <cstdint>
#include <string_view>

namespace fathom {

struct AnnotationMeaning {
  AnnotationRole role = AnnotationRole::None;
  Phase phase = Phase::Data;  // when role == Phase
};

AnnotationMeaning annotation_meaning(std::string_view name) noexcept;

// A record whose role its name gives (readers of traces and of activity files).
AnnotationRecord classified_annotation(std::string name, std::uint64_t thread,
                                       std::int64_t start_ns, std::int64_t end_ns);

}  // namespace fathom
