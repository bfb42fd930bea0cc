#pragma once
// Runs the blocks of a chain: each in its module range; measured in profiled steps; checkpointed
// where the explicit or the session's plan says so. fathom::forward (sequential.cpp) and
// fathom::block (block.h) are its two doors.
#include <fathom/checkpoint.h>
#include <fathom/checkpoint_planner.h>
#include <torch/nn/modules/container/sequential.h>

#include <vector>

namespace fathom::detail {

// checkpointed: the user's segments, or null for the session's plan (if any). selective: the keep
// policy of every segment's checkpoint, or null (block checkpoints).
at::Tensor run_sequential(torch::nn::Sequential& seq, const at::Tensor& input,
                          const std::vector<CheckpointSegment>* checkpointed,
                          const CheckpointOptions* selective = nullptr);

}  // namespace fathom::detail
