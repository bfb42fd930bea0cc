#pragma once
// A CPU allocator that counts the bytes alive and their peak, wrapped around LibTorch's own: on a
// CPU the caching allocator's statistics do not exist, and the process's peak RSS is too coarse
// (and never goes down) to compare strategies run one after another in one process.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

namespace bench {

class CpuPeakAllocator final : public c10::Allocator {
 public:
  // Installs itself over the current CPU allocator for the rest of the process; tensors
  // allocated before keep their own deleters.
  CpuPeakAllocator() : inner_(c10::GetCPUAllocator()) {
    c10::SetCPUAllocator(this, /*priority=*/100);
  }

  c10::DataPtr allocate(std::size_t n) override {
    auto* ctx = new Context{inner_->allocate(n), n, this};
    const std::int64_t now = alive_.fetch_add(static_cast<std::int64_t>(n)) + n;
    std::int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {ctx->inner.get(), ctx, &release, ctx->inner.device()};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  std::int64_t alive() const noexcept { return alive_.load(); }
  // Starts a new peak from what is alive now; peak_since_reset() is the most alive above it.
  void reset_peak() noexcept {
    base_ = alive_.load();
    peak_.store(base_);
  }
  std::int64_t peak_since_reset() const noexcept { return peak_.load() - base_; }

 private:
  struct Context {
    c10::DataPtr inner;
    std::size_t bytes;
    CpuPeakAllocator* owner;
  };
  static void release(void* p) {
    auto* ctx = static_cast<Context*>(p);
    ctx->owner->alive_.fetch_sub(static_cast<std::int64_t>(ctx->bytes));
    delete ctx;
  }

  c10::Allocator* inner_;
  std::atomic<std::int64_t> alive_{0};
  std::atomic<std::int64_t> peak_{0};
  std::int64_t base_ = 0;
};

}  // namespace bench
