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
  // One per process (the deleter reaches it through a static).
  CpuPeakAllocator() : inner_(c10::GetCPUAllocator()) {
    self_ = this;
    c10::SetCPUAllocator(this, /*priority=*/100);
  }

  // Simple data pointers (data == context), as oneDNN's raw_allocate requires: the size sits in
  // a header before the data, the inner allocator's raw deleter frees the whole block.
  c10::DataPtr allocate(std::size_t n) override {
    auto* block = static_cast<char*>(inner_->raw_allocate(n + kHeader));
    *reinterpret_cast<std::size_t*>(block) = n;
    const std::int64_t now = alive_.fetch_add(static_cast<std::int64_t>(n)) + n;
    std::int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    void* data = block + kHeader;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
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
  static constexpr std::size_t kHeader = 64;  // keeps the data 64-byte aligned
  static inline CpuPeakAllocator* self_ = nullptr;
  static void release(void* data) {
    char* block = static_cast<char*>(data) - kHeader;
    self_->alive_.fetch_sub(static_cast<std::int64_t>(*reinterpret_cast<std::size_t*>(block)));
    self_->inner_->raw_deleter()(block);
  }

  c10::Allocator* inner_;
  std::atomic<std::int64_t> alive_{0};
  std::atomic<std::int64_t> peak_{0};
  std::int64_t base_ = 0;
};

}  // namespace bench
