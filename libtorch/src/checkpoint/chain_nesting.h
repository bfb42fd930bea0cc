#pragma once
// fathom measures and plans only the outermost chain on a thread. A Sequential that
// fathom::forward runs inside a block of another chain, or inside a checkpointed function (its
// forward, or its recompute in backward), is part of that block, not a chain of its own.
namespace fathom::detail {

class ChainNesting {
 public:
  ChainNesting() noexcept { ++depth_; }
  ~ChainNesting() { --depth_; }
  ChainNesting(const ChainNesting&) = delete;
  ChainNesting& operator=(const ChainNesting&) = delete;
  static bool outermost() noexcept { return depth_ == 0; }

 private:
  static inline thread_local int depth_ = 0;
};

}  // namespace fathom::detail
