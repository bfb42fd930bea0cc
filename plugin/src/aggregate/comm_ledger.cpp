#include "aggregate/comm_ledger.h"

#include <algorithm>

namespace fathom {

void CommLedger::add_collective(std::int64_t begin_ns, std::int64_t end_ns,
                                std::int64_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  ++collectives_;
  bytes_ += bytes;
  if (end_ns <= begin_ns) return;
  if (pending_.size() >= kMaxPending) fold();
  try {
    pending_.emplace_back(begin_ns, end_ns);
  } catch (...) {
    busy_ns_ += end_ns - begin_ns;  // no memory for the interval: count it alone
  }
}

void CommLedger::add_wait(std::int64_t ns) noexcept {
  std::lock_guard lock(mutex_);
  ++waits_;
  if (ns > 0) wait_ns_ += ns;
}

std::int64_t CommLedger::waited_ns() noexcept {
  std::lock_guard lock(mutex_);
  return wait_ns_;
}

void CommLedger::fold() noexcept {
  std::sort(pending_.begin(), pending_.end());
  std::int64_t begin = 0, end = 0;
  bool open = false;
  for (const auto& [b, e] : pending_) {
    if (open && b <= end) {
      end = std::max(end, e);
      continue;
    }
    if (open) busy_ns_ += end - begin;
    begin = b;
    end = e;
    open = true;
  }
  if (open) busy_ns_ += end - begin;
  pending_.clear();
}

CommStats CommLedger::take() noexcept {
  std::lock_guard lock(mutex_);
  fold();
  CommStats s;
  if (collectives_ > 0 || waits_ > 0) s.source = CommSource::Host;
  s.collectives = collectives_;
  s.bytes = bytes_;
  s.busy_ms = static_cast<double>(busy_ns_) / 1e6;
  s.exposed_ms = static_cast<double>(wait_ns_) / 1e6;
  busy_ns_ = wait_ns_ = collectives_ = bytes_ = waits_ = 0;
  return s;
}

}  // namespace fathom
