#pragma once
// What a host annotation means for the GPU analyses: a training step (the wall clock the
// timeline is measured against) or a phase (what GPU work launched inside it is attributed to).
// fathom's own names come first; PyTorch profiler names (ProfilerStep#N, DataLoader,
// Optimizer.step, autograd's evaluate_function) let the same analyses read a Kineto trace.
#include <fathom/phase.h>

#include <cstdint>
#include <string_view>

namespace fathom {

enum class AnnotationRole : std::uint8_t { None, Step, Phase };

struct AnnotationMeaning {
  AnnotationRole role = AnnotationRole::None;
  Phase phase = Phase::Data;  // when role == Phase
};

AnnotationMeaning annotation_meaning(std::string_view name) noexcept;

}  // namespace fathom
