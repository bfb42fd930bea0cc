#include "collect/cupti/correlation_table.h"

namespace fathom::cupti {

std::uint64_t phase_correlation_id(Phase p) noexcept { return static_cast<std::uint64_t>(p) + 1; }

std::optional<Phase> phase_from_correlation_id(std::uint64_t id) noexcept {
  if (id == 0 || id > kPhaseCount) return std::nullopt;
  return kAllPhases[id - 1];
}

void CorrelationTable::add(const std::vector<ExternalCorrelation>& correlations) {
  for (const ExternalCorrelation& c : correlations) {
    if (c.kind != kFathomCorrelation) continue;  // another client's ids
    if (map_.size() >= kMaxEntries && !map_.count(c.correlation_id)) {
      forget_older_than(delivery_);
      if (map_.size() >= kMaxEntries) map_.clear();
    }
    Ids& ids = map_[c.correlation_id];
    ids.delivery = delivery_;
    if (c.external_id & kOpIdBit) {
      ids.op = c.external_id & ~kOpIdBit;
    } else {
      ids.phase = c.external_id;
    }
  }
}

const CorrelationTable::Ids* CorrelationTable::find(std::uint64_t correlation_id) const {
  if (correlation_id == 0) return nullptr;
  auto it = map_.find(static_cast<std::uint32_t>(correlation_id));
  return it == map_.end() ? nullptr : &it->second;
}

void CorrelationTable::attribute(GpuActivity& batch) const {
  auto apply = [this](auto& records) {
    for (auto& r : records) {
      if (const Ids* ids = find(r.correlation_id)) {
        if (ids->op) r.external_id = ids->op;
        if (auto p = phase_from_correlation_id(ids->phase)) r.phase = p;
      }
    }
  };
  apply(batch.kernels);
  apply(batch.memcpys);
  apply(batch.memsets);
  apply(batch.syncs);
  apply(batch.runtime_calls);
}

void CorrelationTable::next_delivery() {
  ++delivery_;
  if (delivery_ >= kKeepDeliveries) forget_older_than(delivery_ - kKeepDeliveries + 1);
}

void CorrelationTable::forget_older_than(std::uint32_t delivery) {
  for (auto it = map_.begin(); it != map_.end();) {
    it = it->second.delivery < delivery ? map_.erase(it) : std::next(it);
  }
}

}  // namespace fathom::cupti
