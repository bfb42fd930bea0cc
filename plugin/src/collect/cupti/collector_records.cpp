// The collector's record path: the buffers CUPTI gave back, parsed on the calling thread (never
// inside a CUPTI callback), attributed, moved onto fathom's clock and handed to the sink.
#include <iostream>

#include "base/warning_sink.h"
#include "collect/clock.h"
#include "collect/cupti/activity_parser.h"
#include "collect/cupti/collector_impl.h"

namespace fathom {

using collector::record_count;

namespace {

template <typename T>
void append(std::vector<T>& to, std::vector<T>& from) {
  if (to.empty()) {
    to = std::move(from);
  } else {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  }
}

}  // namespace

// Parses what CUPTI gave back: on the calling thread, with no fathom lock held across a CUPTI
// call (the parser calls cuptiActivityGetNextRecord and cuptiGetCallbackName).
void CuptiCollector::Impl::collect_completed(bool own_queues) {
  if (!owner) return;
  std::vector<cupti::CompletedBuffer> done = owner->take_completed();
  CUptiResult error = CUPTI_SUCCESS;
  for (const cupti::CompletedBuffer& b : done) {
    cupti::ParsedBuffer parsed;
    // After a real failure the rest are only given back: their records are not trusted.
    if (error == CUPTI_SUCCESS) cupti::parse_buffer(api, b.data, b.valid, parsed);
    owner->recycle(b);
    try {
      queues.insert({b.context, b.stream});
    } catch (...) {
      detail::swallowed("collect/cupti/collector_records.cpp");
    }
    const std::int64_t lost = parsed.lost.total();
    if (parsed.lost.incomplete)
      note_once("incomplete", "GPU records still incomplete at a forced flush",
                "CUPTI returned them before they were written (the rest of each such buffer "
                "cannot be read); counted as dropped");
    if (parsed.lost.in_flight)
      note_once("in-flight", "GPU work still running at a forced flush",
                "its records have no end time; counted as dropped, never aggregated");
    if (parsed.lost.untimed)
      note_once("untimed", "GPU records without timestamps",
                "CUPTI had no device memory for them (CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE); "
                "counted as dropped");
    try {
      std::lock_guard lock(mutex);
      table.add(parsed.correlations);
      const std::size_t n = record_count(parsed.activity);
      std::int64_t over = 0;
      if (pending_records + n > config.max_pending_records) {
        over = static_cast<std::int64_t>(n);  // no step end for too long: keep memory bounded
      } else {
        GpuActivity& a = parsed.activity;
        append(pending.kernels, a.kernels);
        append(pending.memcpys, a.memcpys);
        append(pending.memsets, a.memsets);
        append(pending.syncs, a.syncs);
        append(pending.runtime_calls, a.runtime_calls);
        pending_records += n;
      }
      pending.dropped_records += lost + over;
      dropped.fetch_add(lost + over);
    } catch (...) {
      dropped.fetch_add(1);
    }
    if (parsed.error != CUPTI_SUCCESS) error = parsed.error;
  }
  if (error != CUPTI_SUCCESS) {
    fail("cuptiActivityGetNextRecord: " + cupti::result_text(api, error));
    return;
  }
  // CUPTI's own count, per queue, read and reset outside every callback.
  std::int64_t cupti_dropped = 0;
  std::set<std::pair<CUcontext, std::uint32_t>> qs = queues;
  qs.emplace(nullptr, 0);  // the global queue, also when none of its buffers came back
  if (!own_queues) qs.clear();
  for (const auto& [context, stream] : qs) {
    std::size_t n = 0;
    if (FATHOM_CUPTI(api, activity_get_num_dropped_records, context, stream, &n) == CUPTI_SUCCESS)
      cupti_dropped += static_cast<std::int64_t>(n);
  }
  if (cupti_dropped) {
    dropped.fetch_add(cupti_dropped);
    std::lock_guard lock(mutex);
    pending.dropped_records += cupti_dropped;
  }
  const std::uint64_t foreign = cupti::BufferRegistry::get().foreign_buffers();
  if (foreign > foreign_seen) {
    foreign_seen = foreign;
    note_once("foreign", kCuptiMeasurements,
              "buffers of another CUPTI client came back through fathom's callbacks after fathom "
              "registered them (" +
                  std::to_string(foreign) +
                  " so far); fathom leaves them alone, and that client loses those records");
  }
}

void CuptiCollector::Impl::deliver(bool settled) {
  GpuActivity batch;
  std::int64_t cut = 0;
  {
    std::lock_guard lock(mutex);
    batch = std::move(pending);
    pending = GpuActivity{};
    pending_records = 0;
    table.attribute(batch);
    table.next_delivery();
    if (settled) table.settle();
    cut = table.cut();
  }
  if (cut > correlations_cut) {
    correlations_cut = cut;
    note_once("correlations-cut", "the op and phase of some GPU work",
              "more than " + std::to_string(cupti::CorrelationTable::kMaxEntries) +
                  " launches were still waiting for their GPU records (no epoch end for too "
                  "long): fathom's memory bound forgot the oldest " +
                  std::to_string(cut) + " so far; their GPU work counts as unattributed");
  }
  // GPU and API records carry CUPTI's time; ops are on fathom's clock already.
  const std::int64_t earliest = armed_at_ns - 1'000'000'000, latest = now_ns() + 50'000'000;
  std::int64_t unaligned = 0;
  auto move = [&](auto& records) {
    std::size_t keep = 0;
    for (std::size_t i = 0; i < records.size(); ++i) {
      auto& r = records[i];
      r.start_ns = clock.to_host(static_cast<std::uint64_t>(r.start_ns));
      r.end_ns = clock.to_host(static_cast<std::uint64_t>(r.end_ns));
      // A record stamped by another clock source (a timestamp callback registered between two
      // flushes) lands nowhere near the run: dropped and counted rather than misplaced.
      if (r.start_ns < earliest || r.end_ns > latest || r.end_ns < r.start_ns) {
        ++unaligned;
        continue;
      }
      if (keep != i) records[keep] = std::move(r);
      ++keep;
    }
    records.resize(keep);
  };
  move(batch.kernels);
  move(batch.memcpys);
  move(batch.memsets);
  move(batch.syncs);
  move(batch.runtime_calls);
  if (unaligned) {
    batch.dropped_records += unaligned;
    dropped.fetch_add(unaligned);
    note_once("unaligned", "GPU records in another clock unit",
              "records stamped before CUPTI's timestamp source changed could not be placed on "
              "fathom's clock; counted as dropped");
  }
  if (record_count(batch) == 0 && batch.dropped_records == 0) return;
  try {
    if (sink) sink(std::move(batch));
  } catch (const std::exception& e) {
    detail::warn("GPU activity could not be aggregated: ", e.what());
  } catch (...) {
    detail::swallowed("collect/cupti/collector_records.cpp");
  }
}

}  // namespace fathom
