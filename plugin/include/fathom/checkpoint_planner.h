#pragma once
// Which blocks of a chain to checkpoint so that the activation memory fits a budget with the least
// recompute time: the optimal dynamic program for chains, in the spirit of rotor (Beaumont et al.,
// "Optimal checkpointing for heterogeneous chains", 2019), restricted to what a reentrant
// checkpoint executes: each block is either run plainly or belongs to one checkpointed segment.
//
// The memory model (every number is a measurement of a plain, not checkpointed, forward):
//
//   Blocks 1..n run in order; boundary value x_j (j = 0..n) is the output of block j and the
//   input of block j+1, b_j bytes. For block i:
//     c_i    own bytes: what it saves for backward that is neither its input nor its output
//     in_i   the bytes of its input x_{i-1} it saves (0 if it keeps none of it)
//     out_i  the bytes of its output x_i it saves
//     t_i    its forward time
//   A plan marks disjoint segments [s..e] as checkpointed; the other blocks are plain. A
//   checkpointed segment keeps only its input x_{s-1} and recomputes its blocks (time Σt) in
//   backward. A boundary value is stored once however many blocks keep it, so the bytes kept at
//   boundary j are the largest of the parts kept:
//     need_j = max( out_j if block j is plain,  in_{j+1} if block j+1 is plain,
//                   b_j if a checkpointed segment starts at block j+1 )
//   Stored after forward:   M = Σ_{i plain} c_i + Σ_{j=0..n} need_j
//   Backward runs n..1 and frees each plain block's saved bytes once it has run; when it reaches
//   a segment S = [s..e], everything before S is still held and S is recomputed plainly:
//     H_S = Σ_{i plain, i<s} c_i + Σ_{j<s} need_j
//     R_S = Σ_{i=s..e} c_i + Σ_{j=s..e} max(out_j, in_{j+1} if j<e)
//   Predicted peak = max(M, max_S H_S + R_S).
//   Not modelled: parameters, gradients and optimizer state (constant under any plan: budgets
//   here are for activations), the gradients flowing between blocks in backward, and transient
//   buffers inside one block's forward. Views and in-place blocks, whose output shares its input's
//   storage, must be merged into their predecessor first (fuse_aliasing_blocks): a checkpoint
//   cannot start at a block that modifies its input in place.
//
// The dynamic program walks the chain left to right; its state is (block j, whether block j is
// plain), its value the Pareto front of (bytes held so far, recompute time), built for each state
// by merging the fronts of the states that reach it. Fronts only hold points that can still finish
// within the budget, so the result is exact (checked against brute force); 200 blocks plan in
// about 0.3 s of CPU at worst (bench/checkpoint_planner_bench). The smallest feasible budget is
// found by bisection on a feasibility pass that keeps the least memory per state.
#include <fathom/checkpoint_plan.h>

#include <cstdint>
#include <vector>

namespace fathom {

// The model above for one plan. Throws fathom::Error when segments overlap, are empty, out of
// order, or outside the chain.
PlanCost evaluate_plan(const std::vector<ChainBlock>& chain,
                       const std::vector<CheckpointSegment>& segments);

// Optimal plan under budget_bytes (activation bytes, as in the model above). max_segment_blocks
// > 0 bounds the length of a segment: 1 when each block is checkpointed on its own (blocks the
// loop runs one by one through fathom::block).
CheckpointPlan plan_checkpoints(const std::vector<ChainBlock>& chain, std::int64_t budget_bytes,
                                int max_segment_blocks = 0);

// The least budget any plan fits in.
std::int64_t min_feasible_budget(const std::vector<ChainBlock>& chain, int max_segment_blocks = 0);

// torch.utils.checkpoint.checkpoint_sequential's plan: k equal segments (sizes differ by at most
// one), all checkpointed but the last, whose backward comes first anyway.
std::vector<CheckpointSegment> equal_segments(int blocks, int k);
// k = ceil(sqrt(blocks)).
std::vector<CheckpointSegment> sqrt_segments(int blocks);

// Merges every block whose output aliases its input into the block before it (the first block
// into the one after it). groups[g] lists the original indices merged into fused block g.
FusedChain fuse_aliasing_blocks(const std::vector<ChainBlock>& chain);
// Segments of a fused chain in the original block indices.
std::vector<CheckpointSegment> unfuse_segments(const FusedChain& fused,
                                               const std::vector<CheckpointSegment>& segments);

}  // namespace fathom
