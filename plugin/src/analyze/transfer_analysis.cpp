#include "analyze/transfer_analysis.h"

#include <algorithm>
#include <array>

#include "aggregate/gpu_aggregator.h"

namespace fathom {
namespace {

std::optional<double> ratio(double part, double whole) {
  if (whole <= 0) return std::nullopt;
  return part / whole;
}

bool host_side(MemcpyKind k) {
  return k == MemcpyKind::HostToDevice || k == MemcpyKind::DeviceToHost;
}

MemoryKind host_memory_of(const MemcpyStats& m) {
  switch (m.kind) {
    case MemcpyKind::HostToDevice:
      return m.src;
    case MemcpyKind::DeviceToHost:
      return m.dst;
    case MemcpyKind::HostToHost:
      return m.src;
    default:
      return MemoryKind::Device;
  }
}

}  // namespace

TransferResult analyze_transfers(const GpuAggregate& a, const LinkPeak& link) {
  TransferResult r;
  r.link = link;
  for (std::size_t i = 0; i < kPhaseBuckets; ++i) {
    const PhaseGpuStats& p = a.phases[i];
    if (p.memcpy_count == 0) continue;
    r.phases.push_back(
        {i == kUnattributed ? "unattributed" : std::string(phase_name(kAllPhases[i])),
         p.memcpy_count, p.memcpy_bytes, p.memcpy_ns});
  }
  for (const MemcpyStats& m : a.memcpys) {
    const MemoryKind host = host_memory_of(m);
    auto row = std::find_if(r.rows.begin(), r.rows.end(), [&](const TransferRow& x) {
      return x.direction == m.kind && x.host_memory == host && x.async == m.async &&
             x.async_known == m.async_known;
    });
    if (row == r.rows.end()) {
      TransferRow fresh;
      fresh.direction = m.kind;
      fresh.host_memory = host;
      fresh.async = m.async;
      fresh.async_known = m.async_known;
      r.rows.push_back(fresh);
      row = r.rows.end() - 1;
    }
    row->count += m.count;
    row->bytes += m.bytes;
    row->total_ns += m.total_ns;

    auto dir = std::find_if(r.directions.begin(), r.directions.end(),
                            [&](const TransferDirection& d) { return d.direction == m.kind; });
    if (dir == r.directions.end()) {
      TransferDirection fresh;
      fresh.direction = m.kind;
      r.directions.push_back(fresh);
      dir = r.directions.end() - 1;
    }
    dir->count += m.count;
    dir->bytes += m.bytes;
    dir->total_ns += m.total_ns;
    if (host == MemoryKind::Pageable) {
      dir->pageable_count += m.count;
      dir->pageable_bytes += m.bytes;
    } else if (host == MemoryKind::Pinned) {
      dir->pinned_count += m.count;
      dir->pinned_bytes += m.bytes;
    }
    if (!m.async_known) {  // neither: the call that issued it was not recorded
      dir->unknown_call_count += m.count;
      dir->unknown_call_bytes += m.bytes;
    } else {
      (m.async ? dir->async_count : dir->sync_count) += m.count;
      (m.async ? dir->async_bytes : dir->sync_bytes) += m.bytes;
    }

    r.count += m.count;
    r.bytes += m.bytes;
    r.total_ns += m.total_ns;
    if (m.async && host == MemoryKind::Pageable) r.pageable_async_count += m.count;
    if (m.async_known && !m.async && m.kind == MemcpyKind::HostToDevice)
      r.large_sync_h2d_count += m.large_count;
  }
  // bytes per nanosecond is GB/s.
  for (TransferRow& row : r.rows) {
    row.gb_per_s = ratio(static_cast<double>(row.bytes), static_cast<double>(row.total_ns));
    if (row.gb_per_s && link.gb_per_s && host_side(row.direction))
      row.share_of_peak = *row.gb_per_s / *link.gb_per_s;
  }
  for (TransferDirection& d : r.directions) {
    d.gb_per_s = ratio(static_cast<double>(d.bytes), static_cast<double>(d.total_ns));
    if (d.gb_per_s && link.gb_per_s && host_side(d.direction))
      d.share_of_peak = *d.gb_per_s / *link.gb_per_s;
  }
  auto by_kind = [](const auto& x, const auto& y) { return x.direction < y.direction; };
  std::stable_sort(r.directions.begin(), r.directions.end(), by_kind);
  std::stable_sort(r.rows.begin(), r.rows.end(), [](const TransferRow& x, const TransferRow& y) {
    if (x.direction != y.direction) return x.direction < y.direction;
    if (x.host_memory != y.host_memory) return x.host_memory < y.host_memory;
    if (x.async_known != y.async_known) return x.async_known;
    return x.async < y.async;
  });

  for (const DeviceTimelineStats& t : a.timelines) {
    r.busy_ns += t.memcpy_ns;
    r.overlap_with_kernels_ns += t.memcpy_ns + t.kernel_ns - t.kernel_or_memcpy_ns;
  }
  r.overlap_share =
      ratio(static_cast<double>(r.overlap_with_kernels_ns), static_cast<double>(r.busy_ns));
  r.window_ns = a.window_ns();
  if (r.count > 0)
    r.share_of_window = ratio(static_cast<double>(r.busy_ns), static_cast<double>(r.window_ns));
  return r;
}

}  // namespace fathom
