#pragma once
// Where a device's entry sits in a table the aggregator keeps in arrival order (the devices'
// properties, their timelines, the held records' lanes, a step's busy time per device). A machine
// has 1 to 8 devices, and scanning that few beats hashing; a hostile trace may name tens of
// thousands, each looked up per record, and scanning all of them made aggregation quadratic.
// Past kScanned entries a hash map holds every entry's place.
#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace fathom::aggregation {

class DeviceIndex {
 public:
  static constexpr std::size_t kScanned = 8;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  // The place of device in table, whose entries id_of names; npos when it has none.
  template <typename Table, typename IdOf>
  std::size_t find(const Table& table, std::int32_t device, IdOf id_of) const noexcept {
    if (table.size() <= kScanned) {
      for (std::size_t i = 0; i < table.size(); ++i)
        if (id_of(table[i]) == device) {
          steps_ += i + 1;
          return i;
        }
      steps_ += table.size();
      return npos;
    }
    ++steps_;
    const auto it = places_.find(device);
    return it == places_.end() ? npos : it->second;
  }

  // Says that table's last entry is new. Throws std::bad_alloc: the caller then takes the entry
  // out again, so that table and index agree.
  template <typename Table, typename IdOf>
  void appended(const Table& table, IdOf id_of) {
    if (table.size() <= kScanned) return;
    if (places_.empty()) {  // the table outgrew the scan: every entry's place, once
      places_.reserve(4 * kScanned);
      for (std::size_t i = 0; i < table.size(); ++i)
        places_.emplace(id_of(table[i]), static_cast<std::uint32_t>(i));
      steps_ += static_cast<std::int64_t>(table.size());
      return;
    }
    places_.emplace(id_of(table.back()), static_cast<std::uint32_t>(table.size() - 1));
    ++steps_;
  }

  // Entries compared or hashed so far: the work of every lookup, which tests bound.
  std::int64_t steps() const noexcept { return steps_; }

 private:
  std::unordered_map<std::int32_t, std::uint32_t> places_;
  mutable std::int64_t steps_ = 0;
};

}  // namespace fathom::aggregation
