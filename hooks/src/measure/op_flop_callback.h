#pragma once
// Counts the FLOPs of the ops that run while it is registered (one profiled step), through an
// at::RecordFunction global callback that sees every op's inputs. The callback is registered when
// this object is built and removed when it dies: outside a profiled step no callback exists, and
// an op costs what it costs without fathom.
//
// Each product counts once, as torch.utils.flop_counter.FlopCounterMode counts it: it sees ops
// at the dispatcher below autograd, after composites (CompositeImplicitAutograd: linear, matmul,
// conv2d, scaled_dot_product_attention) have decomposed, and none of the ops a kernel calls
// inside itself. So on each thread an op counts when no op with a kernel of its own (one that is
// not such a composite) is open around it: aten::linear's addmm counts, aten::convolution's
// _convolution does not. The same op called again inside itself (autocast casts the inputs and
// calls it again; a Python dispatch mode redispatches it) is the same product: it counts once,
// with the inner call's input type (bfloat16 under autocast, not the float32 it was called with).
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analyze/flop_formulas.h"

namespace at {
class RecordFunction;
}
namespace c10 {
struct IValue;
}

namespace fathom::detail {

// What the callback adds to: the phase the session has open (written by the training thread,
// read by the autograd threads that run backward ops), and per (phase, op, dtype) the calls and
// FLOPs so far. Thread-safe.
class FlopTally {
 public:
  static constexpr int kNoPhase = -1;
  struct Entry {
    int phase = kNoPhase;
    std::string op;
    std::string dtype;
    std::int64_t calls = 0;
    std::int64_t flops = 0;
  };

  void set_phase(int phase) noexcept { phase_.store(phase, std::memory_order_release); }
  int phase() const noexcept { return phase_.load(std::memory_order_acquire); }

  void add(int phase, std::string_view op, std::string_view dtype, std::int64_t flops) noexcept;
  // A call whose arguments did not fit torch's formula (torch would have raised): not counted.
  void add_unfit(std::string_view op) noexcept;
  // A call of an op whose products no formula counts (computes_uncounted_products): named.
  void add_uncounted(std::string_view op) noexcept;
  // Empties the tally, returning its entries, the ops that did not fit, and the uncounted calls
  // per op (added to what `uncounted` holds).
  std::vector<Entry> take(
      std::vector<std::string>* unfit = nullptr,
      std::vector<std::pair<std::string, std::int64_t>>* uncounted = nullptr) noexcept;

 private:
  std::atomic<int> phase_{kNoPhase};
  std::mutex mutex_;
  std::vector<Entry> entries_;  // few: one per (phase, op, dtype)
  std::vector<std::string> unfit_;
  std::vector<std::pair<std::string, std::int64_t>> uncounted_;  // few: one per op
};

class OpFlopCallback {
 public:
  // Registers the callback unless another one counts in this process (a second session):
  // registered() then says so and nothing is counted.
  explicit OpFlopCallback(FlopTally& tally) noexcept;
  ~OpFlopCallback();
  OpFlopCallback(const OpFlopCallback&) = delete;
  OpFlopCallback& operator=(const OpFlopCallback&) = delete;
  bool registered() const noexcept { return registered_; }

 private:
  std::uint64_t handle_ = 0;
  bool registered_ = false;
};

// One call's arguments and output shapes as its formula reads them (also for unit_measure.cpp,
// which counts each op's FLOPs of a profiled block).
std::vector<OpArg> flop_args(const at::RecordFunction& fn, FlopFormula formula);
std::vector<Shape> flop_output_shapes(const at::RecordFunction& fn);

// The FLOPs of one call of `op` ("aten::mm") by the counter's formulas: 0 for an op without a
// formula or arguments that do not fit it. Selective checkpointing's keep_if() policies read it.
std::int64_t flops_of_call(std::string_view op, c10::ArrayRef<c10::IValue> inputs,
                           c10::ArrayRef<c10::IValue> outputs);

// torch's name for a scalar type, as Python prints torch.float32: "float32", "bfloat16".
std::string torch_dtype_name(c10::ScalarType type);

// How many kept ops' kernels this thread has skipped (a selective checkpoint's replay returned the
// forward's outputs instead; its op interception counts them here): the FLOP counter compares it
// before and after an op so that replayed work is not counted.
void count_replayed_kernel() noexcept;
std::uint64_t replayed_kernels() noexcept;

}  // namespace fathom::detail
