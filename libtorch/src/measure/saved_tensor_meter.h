#pragma once
// What autograd saves for backward, seen from C++. LibTorch's saved-tensor default hooks
// (at::SavedTensorDefaultHooks) take Python objects; the C++ way in is the autograd engine's
// get_default_saved_variable_hooks(), which the base engine leaves empty. fathom installs an
// engine that differs from the base engine in that one method: while a SavedTensorCapture lives
// on a thread, every tensor autograd saves there passes through a pack hook that records its
// storage and keeps the tensor as the SavedVariable would.
//
// Costs and limits, stated: during a capture, SavedVariable skips its in-place modification check
// (it does so for any saved-tensor hook); fathom captures only in the few profiled steps. The
// engine is installed once per process and only over the base engine: where another engine is the
// default (Python's), nothing is captured and available() says why.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace fathom::detail {

class SavedTensorCapture {
 public:
  // Starts capturing on this thread. Captures nest: a tensor saved inside several is recorded by
  // each.
  SavedTensorCapture() noexcept;
  ~SavedTensorCapture();
  SavedTensorCapture(const SavedTensorCapture&) = delete;
  SavedTensorCapture& operator=(const SavedTensorCapture&) = delete;

  struct Saved {
    const void* storage;
    std::int64_t bytes;
  };
  // Unique storages saved so far, in the order first saved. Parameters (leaves that require
  // grad) and views of them are not activations and are left out.
  const std::vector<Saved>& saved() const noexcept { return saved_; }
  std::int64_t total_bytes() const noexcept { return total_; }
  bool active() const noexcept { return active_; }

  // Installs fathom's engine if it can; false and why when it cannot.
  static bool available(std::string* why = nullptr) noexcept;

  void record(const at::Tensor& t) noexcept;
  SavedTensorCapture* outer() const noexcept { return outer_; }

 private:
  SavedTensorCapture* outer_ = nullptr;
  bool active_ = false;
  std::vector<Saved> saved_;
  std::unordered_map<const void*, std::size_t> index_;
  std::int64_t total_ = 0;
};

// The storage a tensor's bytes live in, and its size; {nullptr, 0} for tensors without storage.
SavedTensorCapture::Saved storage_of(const at::Tensor& t) noexcept;

}  // namespace fathom::detail
