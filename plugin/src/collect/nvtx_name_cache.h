#pragma once
// Registered NVTX names for texts that recur millions of times (ATen op names): the first sighting
// of a text registers it with fathom's domain, every later one finds its handle with one hash and
// one comparison, without allocating or locking. Keyed by the text, not its address: RecordFunction
// names backward nodes with a std::string it builds per call, so the same address holds other
// names from one call to the next.
//
// Bounded: after kCapacity distinct texts find() returns a null Name, and callers pass the text as
// an ASCII message instead (a program that makes op names up at run time cannot grow it forever).
// A cache frees its entries when destroyed; the process's (op_names) is never destroyed.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>

#include "collect/nvtx.h"

namespace fathom::nvtx {

class NameCache {
 public:
  static constexpr std::size_t kCapacity = 4096;

  NameCache() noexcept = default;
  ~NameCache();
  NameCache(const NameCache&) = delete;
  NameCache& operator=(const NameCache&) = delete;

  // The registered name of text, registering it on first sight; null when the cache is full or
  // registration failed. Safe from any thread.
  Name find(std::string_view text) noexcept;
  std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

 private:
  struct Entry;
  static constexpr std::size_t kSlots = 2 * kCapacity;  // at most half full: short probes
  Name insert(std::string_view text, std::size_t hash) noexcept;

  std::atomic<const Entry*> slots_[kSlots] = {};
  std::atomic<std::size_t> size_{0};
  std::mutex insert_mu_;
};

// The process's cache for ATen op names, never destroyed (ops can still run during exit).
NameCache& op_names() noexcept;

}  // namespace fathom::nvtx
