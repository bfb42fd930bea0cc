#pragma once
// A unit's top-level ops as they run (the ops its forward calls, not those they call inside),
// numbered as unit_measure.h numbers them when it measures the unit's op groups: the positions a
// joint activation plan names (activation_applier.h). While a TopLevelOps lives on a thread, a
// thread-local RecordFunction callback counts them and notes the storages each returned.
//
// It tells which op made a storage the way unit_measure.cpp charges saved storages: the first
// top-level op that returned it; a storage saved but never returned (made inside an op), the op
// open when it is saved; the unit's input and what came before it, none.
#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>

#include <optional>
#include <unordered_map>

namespace fathom::detail {

class TopLevelOps {
 public:
  // Starts counting on this thread; `input` (the unit's) was made before the unit. Inside another
  // (a unit inside a unit) it does nothing: the outer one goes on counting.
  explicit TopLevelOps(const at::Tensor& input) noexcept;
  ~TopLevelOps();
  TopLevelOps(const TopLevelOps&) = delete;
  TopLevelOps& operator=(const TopLevelOps&) = delete;

  // The one counting on this thread, or null.
  static const TopLevelOps* on_this_thread() noexcept;
  // False when the callback could not be added: no position is known then.
  bool counting() const noexcept { return handle_.has_value(); }

  // The position of the top-level op running now, or -1 between ops.
  int current() const noexcept { return depth_ > 0 ? started_ - 1 : -1; }
  // The position of the op the storage is charged to (above), or -1.
  int charged(const at::Tensor& t) const;
  // Whether t lives in the unit input's storage.
  bool is_input(const at::Tensor& t) const noexcept;

  // For the callbacks (top_level_ops.cpp).
  struct Access;

 private:
  TopLevelOps* outer_;  // null unless this one does nothing
  std::optional<at::CallbackHandle> handle_;
  int depth_ = 0;                                  // recorded ops open on this thread
  int started_ = 0;                                // top-level ops begun
  std::unordered_map<const void*, int> producer_;  // storage -> the first op that returned it
  const void* input_ = nullptr;                    // the unit input's storage
};

}  // namespace fathom::detail
