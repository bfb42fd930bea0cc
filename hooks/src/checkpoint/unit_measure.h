#pragma once
// One chain unit (a block) measured as the joint activation planner reads it
// (fathom/activation_plan.h): its op groups, each the ops up to one tensor that backward saves.
//
// How: while a profiled block runs plainly, a thread-local RecordFunction callback sees the
// block's top-level ops (the ones its forward calls, not those they call inside) with their
// inputs and outputs, and a SavedTensorCapture of its own sees what autograd saves. A saved
// tensor's pack hook runs inside the autograd kernel of the op that saves it, which runs inside
// that op's RecordFunction scope (the dispatcher opens it before the first kernel, the Autograd
// one, and closes it after that kernel returned): so the storages first saved between a top-level
// op's start and end were saved by it. Each saved storage is charged to the top-level op that
// produced it (the first whose outputs hold it), or, for a tensor made inside an op and never
// returned (layer_norm's statistics), to the op that saved it. FLOPs per op are fathom's counter's
// formulas (analyze/flop_formulas.h) on the outermost op with a formula inside it; an op with one
// (matmul, convolution, attention) makes its group expensive. Time is the host clock around the
// top-level op: on a GPU, launch time, not kernel time (the group times are then scaled to the
// block's measured forward time by the caller).
//
// Grouping follows the model: ops whose outputs nobody saves join the group that reads them (the
// next group to close), and an op whose outputs all alias a storage an earlier op made (a view,
// an in-place op) joins that op's group when it closed just before. The last ops, whose output is
// the unit's, close the last group, which saves what the unit itself saves of its output.
//
// Cost: only in the first profiled steps, only for blocks that run plainly; outside them no
// callback exists. The callbacks' own host time is measured and taken off the ops' and the
// block's times, so the block planner's forward times stay those of the model.
#include <ATen/core/Tensor.h>
#include <fathom/activation_plan.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "measure/saved_tensor_meter.h"

namespace fathom::detail {

// A measured unit: the planner's ActivationUnit and, per group, the positions (in the block's
// top-level op order) of its ops, which a selective applier names to keep a group's output.
struct MeasuredUnit {
  ActivationUnit unit;
  std::vector<std::vector<int>> group_ops;  // [group] -> top-level op positions
  // [group] -> the position of the op that closed it: the one its saved storages are charged to
  // (not the views or in-place ops that joined the group after it), or for the last group, which
  // saves nothing, the op that made the unit's output. Keeping a group keeps this op's outputs,
  // and a recompute does not run it again.
  std::vector<int> group_producer;
  int ops = 0;  // top-level ops the forward ran
};

// What one top-level op did, as plain values: the recorder's record and the grouping's input.
struct UnitOp {
  std::string name;  // "linear", "gelu" (the aten:: namespace dropped)
  double ms = 0;
  double flops = 0;
  bool expensive = false;
  std::vector<const void*> inputs;               // storages of its tensor inputs
  std::vector<const void*> outputs;              // storages of its tensor outputs
  std::vector<SavedTensorCapture::Saved> saved;  // storages first saved while it ran
};

// The grouping above, torch-free. input: the unit input's storage; earlier: storages the chain
// saved before this unit (counted there).
MeasuredUnit group_unit_ops(const std::vector<UnitOp>& ops, const void* input,
                            const std::unordered_map<const void*, std::int64_t>& earlier);

class UnitRecorder {
 public:
  // Starts recording on this thread (nothing when another recorder is open on it).
  UnitRecorder() noexcept;
  ~UnitRecorder();
  UnitRecorder(const UnitRecorder&) = delete;
  UnitRecorder& operator=(const UnitRecorder&) = delete;

  // Stops and groups; a unit without groups when recording failed.
  MeasuredUnit finish(const at::Tensor& input,
                      const std::unordered_map<const void*, std::int64_t>& earlier) noexcept;

  // Host time spent in the recorder's callbacks so far: the caller takes it off the block's time.
  std::int64_t overhead_ns() const noexcept;

  // For the callback (unit_measure.cpp).
  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace fathom::detail
