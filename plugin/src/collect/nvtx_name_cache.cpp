#include "collect/nvtx_name_cache.h"

#include <cstring>
#include <functional>
#include <memory>
#include <new>

namespace fathom::nvtx {

// Immutable once published: readers see it whole through the slot's release store.
struct NameCache::Entry {
  std::size_t hash;
  std::size_t size;
  Name name;
  const char* text;  // owned, NUL-terminated
};

namespace {

bool same(const void* entry_text, std::size_t entry_size, std::string_view text) noexcept {
  return entry_size == text.size() && std::memcmp(entry_text, text.data(), text.size()) == 0;
}

}  // namespace

NameCache::~NameCache() {
  for (auto& slot : slots_) {
    const Entry* e = slot.load(std::memory_order_relaxed);
    if (!e) continue;
    delete[] e->text;
    delete e;
  }
}

Name NameCache::find(std::string_view text) noexcept {
  const std::size_t hash = std::hash<std::string_view>{}(text);
  for (std::size_t i = hash % kSlots, probes = 0; probes < kSlots; i = (i + 1) % kSlots, ++probes) {
    const Entry* e = slots_[i].load(std::memory_order_acquire);
    if (!e) break;
    if (e->hash == hash && same(e->text, e->size, text)) return e->name;
  }
  return insert(text, hash);
}

Name NameCache::insert(std::string_view text, std::size_t hash) noexcept {
  std::lock_guard<std::mutex> lock(insert_mu_);
  std::size_t i = hash % kSlots;
  // Another thread may have published it since the lock-free probe.
  for (std::size_t probes = 0; probes < kSlots; i = (i + 1) % kSlots, ++probes) {
    const Entry* e = slots_[i].load(std::memory_order_acquire);
    if (!e) break;
    if (e->hash == hash && same(e->text, e->size, text)) return e->name;
  }
  if (size_.load(std::memory_order_relaxed) >= kCapacity) return Name{};
  std::unique_ptr<char[]> copy(new (std::nothrow) char[text.size() + 1]);
  if (!copy) return Name{};
  std::memcpy(copy.get(), text.data(), text.size());
  copy[text.size()] = '\0';
  const Name name = register_name(text);
  if (!name.handle) return Name{};
  auto* entry = new (std::nothrow) Entry{hash, text.size(), name, copy.get()};
  if (!entry) return Name{};
  copy.release();
  slots_[i].store(entry, std::memory_order_release);  // i: the empty slot the probe ended on
  size_.fetch_add(1, std::memory_order_relaxed);
  return name;
}

NameCache& op_names() noexcept {
  // Never destroyed: ops can still run during exit, after static destructors.
  static NameCache* cache = new NameCache;
  return *cache;
}

}  // namespace fathom::nvtx
