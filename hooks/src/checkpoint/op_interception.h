#pragma once
// The seam between selective checkpointing and torch's dispatcher: the one file a torch upgrade
// touches (op_interception.cpp holds every dispatcher detail).
//
// How: a boxed fallback on a dispatch key that sits below Autograd and ADInplaceOrView and above
// the backends (c10::DispatchKey::Fake, the out-of-tree torchdistx key no LibTorch runtime code
// uses), switched on per thread through the thread-local included key set. While an
// OpInterception lives on a thread, every op that leaves autograd there passes through the
// fallback; the ops a kernel calls inside itself do not (the key is excluded while a kernel
// runs). So the fallback sees exactly the ops autograd records nodes for, in order:
// - Record (the checkpoint's forward, no graph): each op runs; the policy decides, with its
//   outputs in hand, whether they are kept; every op is logged by name.
// - Replay (the recompute in backward, grad mode on): op i must be the forward's op i (by
//   schema); a kept op's kernel does not run: the fallback returns the forward's outputs, and
//   autograd above it builds the node as usual. A mismatch, or a kept output changed in place
//   since the forward, is a fathom::Error naming the ops.
// Why this and not the alternatives (checked against torch 2.11): saved-variable hooks (what
// fathom's engine provides) see what autograd saves, not which kernels run, so they cannot skip
// a kernel; a RecordFunction callback observes ops but cannot replace their result; a
// TorchDispatchMode is Python only. A dispatcher fallback is plain C++ and is how torch's own
// selective checkpointing works (below autograd, a dispatch mode), minus Python.
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <fathom/checkpoint.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace c10 {
struct OperatorName;
}

namespace fathom::detail {

// What the forward of one selective checkpoint ran, op by op, and the outputs it kept.
class OpLog {
 public:
  struct Op {
    const c10::OperatorName* name = nullptr;  // lives as long as the op is registered
    bool kept = false;
    bool offload = false;  // kept in host memory (OpChoice::Offload)
    // A kept op's returns while the log holds them (tensors, and the numbers some attention
    // kernels return beside them), and per defined tensor its version counter and its version.
    std::vector<c10::IValue> outputs;
    std::vector<std::optional<c10::VariableVersion>> counters;
    std::vector<std::uint32_t> versions;
  };

  // The kept outputs, in order, moved out of the log (the checkpoint saves them for backward
  // through autograd, so saved-tensor hooks see them). First drops, as not kept, the outputs the
  // function itself changed in place after the op (the recompute then runs the op again, as a
  // block checkpoint would); `demoted` gets their names, `offload` whether each returned tensor's
  // op was chosen Offload.
  std::vector<at::Tensor> take_kept(std::vector<std::string>* demoted = nullptr,
                                    std::vector<bool>* offload = nullptr);
  // Throws fathom::Error naming the op when a kept output changed in place since the forward.
  void check_versions() const;
  // Gives back the kept outputs (in take_kept's order) for a recompute.
  void restore_kept(const std::vector<at::Tensor>& kept);
  // After a recompute: every op of the forward must have run again; drops the outputs.
  void finish_replay();

  std::int64_t kept_bytes() const noexcept { return kept_bytes_; }
  std::size_t size() const noexcept { return ops_.size(); }
  std::size_t kept_ops() const noexcept;

  // Used by the fallback.
  std::vector<Op> ops_;
  std::size_t cursor_ = 0;
  std::int64_t kept_bytes_ = 0;
};

enum class InterceptMode { Record, Replay };

struct InterceptContext {
  OpLog* log = nullptr;  // null: pass ops through
  InterceptMode mode = InterceptMode::Record;
  const CheckpointOptions* policy = nullptr;
};

// Routes this thread's ops through the fallback while it lives (nests: an inner one replaces the
// outer until it ends). A null log passes ops through untouched (a plain checkpoint inside a
// selective one keeps its own ops out of the outer log).
class OpInterception {
 public:
  OpInterception(OpLog* log, InterceptMode mode, const CheckpointOptions* policy);
  ~OpInterception();
  OpInterception(const OpInterception&) = delete;
  OpInterception& operator=(const OpInterception&) = delete;

 private:
  InterceptContext* outer_;
  InterceptContext self_;
  std::unique_ptr<c10::impl::IncludeDispatchKeyGuard> include_;
};

// Registers the interception on the dispatcher if it is not yet: false, and why, when it cannot
// be (OpInterception then throws).
bool interception_available(std::string* why = nullptr) noexcept;

// True while an OpInterception lives on this thread.
bool intercepting() noexcept;

// Empty when `op` ("aten::mm") can be kept; otherwise why not and what to name instead.
std::string keepable_op_problem(const std::string& op);

}  // namespace fathom::detail
