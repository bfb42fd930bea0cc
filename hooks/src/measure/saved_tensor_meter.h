#pragma once
// What autograd saves for backward, seen from C++. LibTorch's saved-tensor default hooks
// (at::SavedTensorDefaultHooks) take Python objects; the C++ way in is the autograd engine's
// get_default_saved_variable_hooks(), which the base engine leaves empty. fathom installs an
// engine that differs from the base engine in that one method: while a SavedTensorPacker lives
// on a thread, every tensor autograd saves there passes through fathom's pack hook.
//
// The packers on a thread form a stack (innermost last). Each sees every saved tensor (observe);
// the innermost one that takes a tensor (pack) holds it until backward; a tensor none takes is
// kept as the SavedVariable would keep it. The meter (SavedTensorCapture) only observes; the
// offloader (offload.cpp) takes tensors to host memory.
//
// Costs and limits, stated: with any saved-tensor hook SavedVariable skips its in-place
// modification check, so fathom's hook makes it instead (the version counter at pack against
// the one at unpack, an error naming the ops, as SavedVariable's); fathom meters only in the few
// profiled steps. The engine is installed once per process and only over the base engine: where
// another engine is the default (Python's), nothing is seen and available() says why.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace fathom::detail {

class SavedTensorPacker {
 public:
  // What a packer holds in place of one saved tensor until backward unpacks it (possibly more
  // than once: retain_graph).
  class Packed {
   public:
    virtual ~Packed() = default;
    virtual at::Tensor unpack() = 0;
  };

  // Pushes this packer on the thread's stack (active() is false, and nothing is seen, when the
  // engine hook cannot be installed).
  SavedTensorPacker() noexcept;
  virtual ~SavedTensorPacker();
  SavedTensorPacker(const SavedTensorPacker&) = delete;
  SavedTensorPacker& operator=(const SavedTensorPacker&) = delete;

  // Every tensor saved on this thread while the packer lives. parameter: a leaf that requires
  // grad, or a view of one (Linear saves weight.t()): weights, not activations.
  virtual void observe(const at::Tensor& /*tensor*/, bool /*parameter*/) noexcept {}
  // Takes the tensor (its packed form) or leaves it to the packers outside this one (null).
  // Called innermost first, after every packer observed it; an exception fails the forward op.
  virtual std::unique_ptr<Packed> pack(const at::Tensor& /*tensor*/, bool /*parameter*/) {
    return nullptr;
  }

  bool active() const noexcept { return active_; }
  SavedTensorPacker* outer() const noexcept { return outer_; }
  // The innermost packer of this thread, or null.
  static SavedTensorPacker* innermost() noexcept;

  // Installs fathom's engine if it can; false and why when it cannot.
  static bool available(std::string* why = nullptr) noexcept;

 private:
  SavedTensorPacker* outer_ = nullptr;
  bool active_ = false;
};

// The meter: the unique storages saved while it lives, with their bytes.
class SavedTensorCapture final : public SavedTensorPacker {
 public:
  // Starts capturing on this thread. Captures nest: a tensor saved inside several is recorded by
  // each.
  SavedTensorCapture() noexcept = default;

  struct Saved {
    const void* storage;
    std::int64_t bytes;
  };
  // Unique storages saved so far, in the order first saved. Parameters (leaves that require
  // grad) and views of them are not activations and are left out.
  const std::vector<Saved>& saved() const noexcept { return saved_; }
  std::int64_t total_bytes() const noexcept { return total_; }

  void observe(const at::Tensor& tensor, bool parameter) noexcept override;
  void record(const at::Tensor& t) noexcept;

 private:
  std::vector<Saved> saved_;
  std::unordered_map<const void*, std::size_t> index_;
  std::int64_t total_ = 0;
};

// The storage a tensor's bytes live in, and its size; {nullptr, 0} for tensors without storage.
SavedTensorCapture::Saved storage_of(const at::Tensor& t) noexcept;

}  // namespace fathom::detail
