#pragma once
// A map from non-zero 64-bit ids (CUPTI correlation ids, external ids) to small values, for the
// host records the aggregator holds for one generation. A std::unordered_map allocated a node per
// launch and freed it at the generation's end: a malloc and a free for most records. Here slots
// live in one array that grows to the largest generation and stays (memory flat); clear() is one
// increment (a slot written in an earlier generation reads as empty), so a generation costs no
// allocation and no pass over the array.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fathom::aggregation {

template <typename V>
class IdMap {
 public:
  // Inserts or overwrites; true when id was not there. Throws std::bad_alloc only while the
  // array grows.
  bool assign(std::uint64_t id, const V& value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    Slot& s = probe(slots_, id, stamp_);
    const bool inserted = s.stamp != stamp_;
    if (inserted) {
      s.stamp = stamp_;
      s.id = id;
      ++size_;
    }
    s.value = value;
    return inserted;
  }

  const V* find(std::uint64_t id) const noexcept {
    if (slots_.empty()) return nullptr;
    const Slot& s = probe(slots_, id, stamp_);
    return s.stamp == stamp_ ? &s.value : nullptr;
  }

  V* find(std::uint64_t id) noexcept {
    return const_cast<V*>(static_cast<const IdMap&>(*this).find(id));
  }
  // Calls f(id, value) for every entry of this generation, in no particular order.
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.stamp == stamp_) f(s.id, s.value);
  }
  std::size_t size() const noexcept { return size_; }

  void clear() noexcept {
    size_ = 0;
    if (++stamp_ == 0) {  // after 2^32 generations: the old stamps would read as current
      for (Slot& s : slots_) s.stamp = 0;
      stamp_ = 1;
    }
  }

 private:
  struct Slot {
    std::uint64_t id = 0;
    std::uint32_t stamp = 0;  // the generation that wrote it; another one's slot is empty
    V value{};
  };

  // The slot holding id, or the empty slot where it would go (linear probing; half full at most).
  template <typename Slots>
  static auto& probe(Slots& slots, std::uint64_t id, std::uint32_t stamp) noexcept {
    const std::size_t mask = slots.size() - 1;
    std::size_t i = static_cast<std::size_t>((id * 0x9E3779B97F4A7C15ull) >> 32) & mask;
    while (slots[i].stamp == stamp && slots[i].id != id) i = (i + 1) & mask;
    return slots[i];
  }

  void grow() {
    std::vector<Slot> bigger(slots_.empty() ? 64 : 2 * slots_.size());
    for (const Slot& s : slots_)
      if (s.stamp == stamp_) {
        Slot& to = probe(bigger, s.id, 1);
        to = s;
        to.stamp = 1;
      }
    slots_.swap(bigger);
    stamp_ = 1;
  }

  std::vector<Slot> slots_;  // a power of two long
  std::uint32_t stamp_ = 1;
  std::size_t size_ = 0;
};

}  // namespace fathom::aggregation
