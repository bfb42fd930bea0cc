#pragma once
// A unit that a joint activation plan keeps in part (activation_applier.h: UnitActionKind::Mixed)
// run as the plan says, op group by op group: the groups' producing top-level ops (positions as
// unit_measure.h numbers them, top_level_ops.h counts them again as the unit runs) are kept on
// the device, offloaded to host memory, or recomputed.
//
// With a group to recompute, the unit is a selective checkpoint (checkpoint.h) whose policy
// chooses by the top-level op each op runs in: kept and offloaded ops' outputs are not recomputed.
// Without, it runs plainly under fathom::offload, which takes the saved storages charged to the
// offloaded ops (as unit_measure.cpp charges them) and leaves the rest on the device, and brings
// them back one ahead of the one backward uses (OffloadOptions::fetch_ahead(1)).
#include <fathom/checkpoint.h>
#include <fathom/offload.h>

#include <memory>
#include <string>
#include <vector>

namespace fathom::detail {

struct MixedUnitRun {
  std::vector<int> kept;       // top-level op positions whose outputs stay on the device
  std::vector<int> offloaded;  // ... go to host memory and come back for backward
  bool recompute = false;      // the other groups are recomputed: a selective checkpoint
  bool offload_input = false;  // what the unit holds of its input goes to host memory too
  OffloadOptions offload;      // how offloaded tensors travel (cpu_copy in tests, a meter)
};

// forward: the unit (one or more of a chain's items); modules: theirs, for the checkpoint.
at::Tensor run_mixed_unit(const TensorFunction& forward, const at::Tensor& input,
                          const MixedUnitRun& run,
                          const std::vector<std::shared_ptr<torch::nn::Module>>& modules);

// A test seam for a machine without a GPU, where the host is the device and offloading frees
// nothing: tests and the benchmark plan as if a link of `bytes_per_second` (each way) joined host
// and device, and the offloaded groups take OffloadOptions::cpu_copy's path. 0 (the default)
// turns it off. Process-wide; set it before the session plans.
void set_cpu_offload_stand_in(double bytes_per_second) noexcept;
double cpu_offload_stand_in() noexcept;

// Whether this process can run selective checkpoints (the dispatcher accepted fathom's op
// interception); why not when it cannot.
bool selective_checkpointing_available(std::string* why = nullptr) noexcept;

}  // namespace fathom::detail
