#pragma once
// LibTorch modules have no forward hooks, so fathom cannot see a Sequential's items run by
// itself. forward(seq, x) runs the items one by one, each inside its module range; it computes
// exactly what seq->forward(x) computes. In a session's profiled steps it also measures what each
// item saves for backward and how long its forward takes, and in Auto mode it checkpoints the
// items the session's plan names (checkpoint_extension.h). A Sequential run inside an item of
// another is part of that item.
#include <fathom/checkpoint.h>
#include <fathom/checkpoint_planner.h>
#include <fathom/session.h>
#include <torch/nn/modules/container/sequential.h>

#include <vector>

namespace fathom {

at::Tensor forward(torch::nn::Sequential& seq, const at::Tensor& input);

// The same, checkpointing the items of each segment [begin, end) as one (fathom::checkpoint),
// as a plan from the report or the planner says: a segment keeps only its input, and backward
// recomputes its items. Throws fathom::Error for segments that overlap, are out of order, or
// lie outside the Sequential.
at::Tensor forward(torch::nn::Sequential& seq, const at::Tensor& input,
                   const std::vector<CheckpointSegment>& checkpointed);

// The same, each segment a selective checkpoint with `selective`'s keep policy (its keep() and
// keep_if(); fathom names the segment's modules itself): backward recomputes what the policy
// does not keep.
at::Tensor forward(torch::nn::Sequential& seq, const at::Tensor& input,
                   const std::vector<CheckpointSegment>& checkpointed,
                   const CheckpointOptions& selective);

}  // namespace fathom
