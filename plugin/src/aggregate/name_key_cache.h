#pragma once
// Kernel rows found by the source's name key (KernelRecord::name_key, CUPTI's name pointer)
// instead of by hashing the name: hashing a 150-character template name on every record was an
// eighth of the aggregation. Direct-mapped and fixed in size (no allocation, memory flat): a
// key's slot holds the row it last led to. The caller checks the row's name against the record's
// (a compare, far cheaper than a hash), so a key that is reused for another name, or two keys
// sharing a slot, cost a hash lookup and never give a wrong row. The row's name may differ from
// the record's (a mangled name is shown demangled): the slot keeps the text it was found by.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fathom::aggregation {

class NameKeyCache {
 public:
  // The row the key last led to, when it led there from this text; nullopt when its slot holds
  // another key (or none), or the key came with another text.
  std::optional<std::uint32_t> find(std::uint64_t key, std::string_view text) const noexcept {
    const Slot& s = slots_[slot(key)];
    if (key == 0 || s.key != key || s.text != text) return std::nullopt;
    return s.row;
  }
  // text must outlive the cache (the aggregator passes its name index's copy).
  void remember(std::uint64_t key, std::uint32_t row, std::string_view text) noexcept {
    if (key != 0) slots_[slot(key)] = {key, row, text};
  }

 private:
  static constexpr int kBits = 11;  // 2,048 slots, 64 KiB
  struct Slot {
    std::uint64_t key = 0;
    std::uint32_t row = 0;
    std::string_view text;
  };
  // Fibonacci hashing: pointers differ in their middle bits; the multiply spreads them to the top.
  static std::size_t slot(std::uint64_t key) noexcept {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> (64 - kBits));
  }
  std::array<Slot, std::size_t{1} << kBits> slots_{};
};

}  // namespace fathom::aggregation
