#pragma once
// fathom measures and plans only the outermost chain on a thread. A Sequential that
// fathom::forward runs inside a block of another chain, or inside a checkpointed function (its
// forward, or its recompute in backward), is part of that block, not a chain of its own.
//
// A block found directly inside a registered block's forward (fathom::block or a Sequential run
// by a model that fathom::forward runs) tells the extension that the outer block holds blocks of
// its own: from the next profiled step on the outer one is a range only, and its blocks are the
// chain (checkpoint_extension.h, holds_blocks).
namespace fathom::detail {

class ChainNesting {
 public:
  // block: the registered block's module this level runs the forward of, or null (a Sequential's
  // items, a checkpointed function).
  explicit ChainNesting(const void* block = nullptr) noexcept : outer_block_(block_) {
    ++depth_;
    block_ = block;
  }
  ~ChainNesting() {
    --depth_;
    block_ = outer_block_;
  }
  ChainNesting(const ChainNesting&) = delete;
  ChainNesting& operator=(const ChainNesting&) = delete;
  static bool outermost() noexcept { return depth_ == 0; }
  // The outermost registered block whose forward runs now, directly (not inside a Sequential or a
  // checkpoint within it), or null.
  static const void* enclosing_block() noexcept { return depth_ == 1 ? block_ : nullptr; }

 private:
  const void* outer_block_;
  static inline thread_local int depth_ = 0;
  static inline thread_local const void* block_ = nullptr;
};

}  // namespace fathom::detail
