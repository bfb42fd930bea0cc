#include "analyze/cross_device_union.h"

#include <algorithm>

#include "aggregate/gpu_aggregator.h"
#include "aggregate/kernel_classifier.h"

namespace fathom {

void CrossDeviceUnion::Spans::add(std::int64_t start, std::int64_t end) {
  if (end <= start) return;
  if (!merged_.empty() && sorted_) {
    auto& last = merged_.back();
    if (start < last.first) {
      sorted_ = false;  // out of order: merged once, when read
    } else if (start <= last.second) {
      last.second = std::max(last.second, end);
      return;
    }
  }
  merged_.emplace_back(start, end);
}

void CrossDeviceUnion::Spans::normalize() const {
  if (sorted_) return;
  std::sort(merged_.begin(), merged_.end());
  std::size_t out = 0;
  for (std::size_t i = 1; i < merged_.size(); ++i) {
    if (merged_[i].first <= merged_[out].second)
      merged_[out].second = std::max(merged_[out].second, merged_[i].second);
    else
      merged_[++out] = merged_[i];
  }
  if (!merged_.empty()) merged_.resize(out + 1);
  sorted_ = true;
}

std::int64_t CrossDeviceUnion::Spans::within(std::int64_t begin, std::int64_t end) const {
  normalize();
  std::int64_t sum = 0;
  auto it = std::upper_bound(merged_.begin(), merged_.end(), begin,
                             [](std::int64_t v, const auto& s) { return v < s.second; });
  for (; it != merged_.end() && it->first < end; ++it)
    sum += std::min(end, it->second) - std::max(begin, it->first);
  return sum;
}

bool CrossDeviceUnion::communication(const std::string& name) {
  auto it = communication_names_.find(name);
  if (it == communication_names_.end())
    it = communication_names_.emplace(name, classify_kernel(name).communication).first;
  return it->second;
}

void CrossDeviceUnion::add(const GpuActivity& b) {
  for (const MemcpyRecord& m : b.memcpys) copies_.add(m.start_ns, m.end_ns);
  for (const KernelRecord& k : b.kernels)
    if (communication(k.name)) communication_.add(k.start_ns, k.end_ns);
  // As the timeline counts them: host-blocking kinds only, and the runtime's blocking calls.
  for (const SyncRecord& s : b.syncs)
    if (s.kind != SyncKind::StreamWaitEvent) sync_records_.add(s.start_ns, s.end_ns);
  for (const RuntimeCallRecord& r : b.runtime_calls)
    if (is_host_sync_call(r.name)) sync_calls_.add(r.start_ns, r.end_ns);
}

void CrossDeviceUnion::apply(GpuSummary& g, std::int64_t begin, std::int64_t end) const {
  const std::int64_t window = end - begin;
  if (window <= 0) return;
  auto share = [&](std::int64_t part) { return double(part) / double(window); };
  TransferResult& t = g.transfers;
  t.busy_ns = copies_.within(begin, end);
  if (t.count > 0) t.share_of_window = share(t.busy_ns);
  // overlap_share stays the devices' own (their overlap over their busy time): a ratio of sums.
  t.overlap_with_kernels_ns = std::min(t.overlap_with_kernels_ns, t.busy_ns);
  TimelineResult& l = g.timeline;
  if (l.communication_kernels > 0) l.communication_share = share(communication_.within(begin, end));
  l.sync_record_ns = sync_records_.within(begin, end);
  l.sync_call_ns = sync_calls_.within(begin, end);
}

}  // namespace fathom
