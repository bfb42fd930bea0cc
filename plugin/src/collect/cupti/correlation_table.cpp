#include "collect/cupti/correlation_table.h"

#include <algorithm>
#include <map>

#include "aggregate/gpu_aggregator.h"

namespace fathom::cupti {

std::uint64_t phase_correlation_id(Phase p) noexcept { return static_cast<std::uint64_t>(p) + 1; }

std::optional<Phase> phase_from_correlation_id(std::uint64_t id) noexcept {
  if (id == 0 || id > kPhaseCount) return std::nullopt;
  return kAllPhases[id - 1];
}

void CorrelationTable::add(const std::vector<ExternalCorrelation>& correlations) {
  for (const ExternalCorrelation& c : correlations) {
    if (c.kind != kFathomCorrelation) continue;  // another client's ids
    if (map_.size() >= kMaxEntries && !map_.count(c.correlation_id)) make_room();
    Ids& ids = map_[c.correlation_id];
    ids.delivery = delivery_;
    if (c.external_id & kOpIdBit) {
      ids.op = c.external_id & ~kOpIdBit;
    } else {
      ids.phase = c.external_id;
    }
  }
}

CorrelationTable::Ids* CorrelationTable::find(std::uint64_t correlation_id) {
  if (correlation_id == 0) return nullptr;
  auto it = map_.find(static_cast<std::uint32_t>(correlation_id));
  return it == map_.end() ? nullptr : &it->second;
}

void CorrelationTable::attribute(GpuActivity& batch) {
  auto apply = [this](auto& records, auto pays) {
    for (auto& r : records) {
      if (Ids* ids = find(r.correlation_id)) {
        if (ids->op) r.external_id = ids->op;
        if (auto p = phase_from_correlation_id(ids->phase)) r.phase = p;
        if (pays(r) && ids->paid == kOwed) ids->paid = delivery_;
      }
    }
  };
  auto gpu = [](const auto&) { return true; };
  auto host = [](const auto&) { return false; };
  apply(batch.kernels, gpu);
  apply(batch.memcpys, gpu);
  apply(batch.memsets, gpu);
  apply(batch.syncs, host);
  // A call that launches no GPU work (a synchronization, an event) owes nothing once it is seen.
  apply(batch.runtime_calls, [](const RuntimeCallRecord& r) { return !launches_gpu_work(r.name); });
}

void CorrelationTable::next_delivery() {
  ++delivery_;
  if (delivery_ < kKeepDeliveries) return;
  const std::uint32_t before = delivery_ - kKeepDeliveries + 1;
  std::erase_if(map_,
                [&](const auto& e) { return e.second.paid != kOwed && e.second.paid < before; });
}

void CorrelationTable::settle() { map_.clear(); }

void CorrelationTable::make_room() {
  // The paid first, then the oldest deliveries' owed ones, a quarter of the table at once so
  // that the scans stay rare.
  std::erase_if(map_, [](const auto& e) { return e.second.paid != kOwed; });
  if (map_.size() < kMaxEntries) return;
  std::map<std::uint32_t, std::size_t> by_delivery;
  for (const auto& e : map_) ++by_delivery[e.second.delivery];
  std::uint32_t upto = 0;
  std::size_t n = 0;
  for (const auto& [delivery, count] : by_delivery) {
    upto = delivery;
    n += count;
    if (n >= kMaxEntries / 4) break;
  }
  std::erase_if(map_, [&](const auto& e) { return e.second.delivery <= upto; });
  cut_ += static_cast<std::int64_t>(n);
}

}  // namespace fathom::cupti
