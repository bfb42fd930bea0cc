// The sweep: each held GPU record attributed to the phase and op that launched it, and the
// device timelines (busy, idle and why) advanced over the window.
#include <fathom/gpu_records.h>

#include "aggregate/aggregator_state.h"
#include "aggregate/tensor_core_ops.h"
#include "base/thresholds.h"

namespace fathom {

GpuAggregator::Impl::Lookup GpuAggregator::Impl::build_lookup() {
  Lookup l;
  l.ranges = ranges;
  std::sort(l.ranges.begin(), l.ranges.end(),
            [](const PhaseRange& a, const PhaseRange& b) { return a.start < b.start; });
  for (const PhaseRange& r : l.ranges) {
    l.longest_range = std::max(l.longest_range, duration(r.start, r.end));
    if (r.phase != Phase::Data) continue;
    if (!l.data.empty() && r.start <= l.data.back().second)
      l.data.back().second = std::max(l.data.back().second, r.end);
    else
      l.data.emplace_back(r.start, r.end);
  }
  l.syncs = host_syncs;
  std::sort(l.syncs.begin(), l.syncs.end(),
            [](const HostSpan& a, const HostSpan& b) { return a.start < b.start; });
  std::int64_t m = kNever;
  for (const HostSpan& s : l.syncs) l.sync_end_max.push_back(m = std::max(m, s.end));
  for (auto& gen : op_instances)
    for (OpInstance& op : gen) {
      l.ops.push_back({op.thread, op.start, op.end, &op});
      l.longest_op = std::max(l.longest_op, duration(op.start, op.end));
    }
  std::sort(l.ops.begin(), l.ops.end(), [](const Lookup::OpSpan& a, const Lookup::OpSpan& b) {
    return a.thread != b.thread ? a.thread < b.thread : a.start < b.start;
  });
  return l;
}

std::optional<Phase> GpuAggregator::Impl::phase_at(const Lookup& l, std::int64_t t,
                                                   std::uint64_t thread) {
  auto it = std::upper_bound(l.ranges.begin(), l.ranges.end(), t,
                             [](std::int64_t v, const PhaseRange& r) { return v < r.start; });
  std::optional<Phase> any;
  while (it != l.ranges.begin()) {
    --it;
    if (it->start < t - l.longest_range) break;
    if (it->end <= t) continue;
    if (it->thread == thread) return it->phase;
    if (!any) any = it->phase;
  }
  return any;
}

OpInstance* GpuAggregator::Impl::op_at(const Lookup& l, std::uint64_t thread, std::int64_t t) {
  auto it = std::upper_bound(
      l.ops.begin(), l.ops.end(), std::make_pair(thread, t),
      [](const std::pair<std::uint64_t, std::int64_t>& v, const Lookup::OpSpan& o) {
        return v.first != o.thread ? v.first < o.thread : v.second < o.start;
      });
  // Ops on one thread nest or follow each other: none that starts before t - longest can hold t.
  while (it != l.ops.begin()) {
    --it;
    if (it->thread != thread || it->start < t - l.longest_op) break;
    if (it->end > t) return it->op;
  }
  return nullptr;
}

std::pair<Launch*, std::size_t> GpuAggregator::Impl::find_launch(std::uint64_t correlation) {
  if (correlation == 0) return {nullptr, 0};
  for (std::size_t g : {cur(), prev()}) {
    if (Launch* l = launches[g].find(correlation)) return {l, g};
  }
  return {nullptr, 0};
}

OpInstance* GpuAggregator::Impl::find_op(std::uint64_t external_id) {
  if (external_id == 0) return nullptr;
  for (std::size_t g : {cur(), prev()}) {
    if (const std::uint32_t* i = op_by_external_id[g].find(external_id))
      return &op_instances[g][*i];
  }
  return nullptr;
}

void GpuAggregator::Impl::attribute(HeldGpu& h, const Lookup& l) {
  const auto [launch, slot] = find_launch(h.correlation);
  if (launch && !launch->paid) {
    launch->paid = true;
    --unpaid[slot];
  }
  const std::uint64_t external_id = h.external_id ? h.external_id
                                    : launch      ? launch->external_id
                                                  : 0;
  OpInstance* op = find_op(external_id);
  if (!op && launch && !l.ops.empty()) op = op_at(l, launch->thread, launch->start);
  h.launch_ns = launch ? launch->start : kNever;

  std::optional<Phase> phase;
  if (h.phase >= 0)
    phase = static_cast<Phase>(h.phase);
  else if (launch && launch->phase >= 0)
    phase = static_cast<Phase>(launch->phase);
  else if (launch)
    phase = phase_at(l, launch->start, launch->thread);
  else if (op)
    phase = phase_at(l, op->start, op->thread);
  else
    phase = phase_at(l, h.start, 0);
  PhaseGpuStats& p = phases[phase ? static_cast<std::size_t>(*phase) : kUnattributed];
  PhaseGpuStats* step = nullptr;
  if (!step_rows.empty()) {
    h.step = launch ? step_at(launch->start, launch->thread)
             : op   ? step_at(op->start, op->thread)
                    : step_at(h.start, 0);
    if (h.step >= 0) step = &step_rows[static_cast<std::size_t>(h.step)].work;
  }

  const std::int64_t d = h.end - h.start;
  if (h.type == HeldType::Kernel) {
    bool tensor_core = h.tensor_core, unknown = h.undecided && !h.communication;
    if (unknown && op && op->tensor_core_inputs && h.op_may_decide) {
      tensor_core = true;
      unknown = false;
      ++kernels[h.kernel].tensor_core_by_op_count;
      kernels[h.kernel].tensor_core_by_op_ns += d;
    }
    for (PhaseGpuStats* s : {&p, step}) {
      if (!s) continue;
      ++s->kernel_count;
      s->kernel_ns += d;
      if (tensor_core) s->tensor_core_ns += d;
      if (unknown) s->unknown_ns += d;
      if (h.communication) s->communication_ns += d;
    }
    if (op) {
      ++op->kernels;
      if (tensor_core) {
        ++op->tensor_core_kernels;
        op->tensor_core_ns += d;
      } else if (unknown) {
        ++op->unknown_kernels;
        op->unknown_ns += d;
      } else {
        op->cuda_core_ns += d;
      }
    }
  } else if (h.type == HeldType::Memcpy) {
    for (PhaseGpuStats* s : {&p, step}) {
      if (!s) continue;
      ++s->memcpy_count;
      s->memcpy_bytes += h.bytes;
      s->memcpy_ns += d;
    }
  }
}

std::int64_t GpuAggregator::Impl::data_overlap(const Lookup& l, std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  auto it = std::upper_bound(l.data.begin(), l.data.end(), a,
                             [](std::int64_t v, const auto& r) { return v < r.first; });
  if (it != l.data.begin()) --it;
  for (; it != l.data.end() && it->first < b; ++it)
    sum += std::max<std::int64_t>(0, std::min(b, it->second) - std::max(a, it->first));
  return std::min(sum, b - a);
}

bool GpuAggregator::Impl::host_synchronizing(const Lookup& l, std::int64_t t) {
  auto it = std::upper_bound(l.syncs.begin(), l.syncs.end(), t,
                             [](std::int64_t v, const HostSpan& s) { return v < s.start; });
  if (it == l.syncs.begin()) return false;
  return l.sync_end_max[static_cast<std::size_t>(it - l.syncs.begin()) - 1] >= t;
}

void GpuAggregator::Impl::attribute_gap(IdleStats& idle, const Lookup& l, std::int64_t a,
                                        std::int64_t b, std::int64_t launch_ns) {
  if (b <= a) return;
  ++idle.gaps;
  const std::int64_t data = data_overlap(l, a, b);
  idle.data_wait_ns += data;
  const std::int64_t rest = (b - a) - data;
  if (rest <= 0) return;
  if (host_synchronizing(l, a))
    idle.sync_ns += rest;
  else if (launch_ns != kNever && launch_ns >= a)
    idle.host_launch_ns += rest;
  // else: left to other_ns, which the snapshot computes as what is left of the idle time
}

DeviceState& GpuAggregator::Impl::device_state(std::int32_t device) {
  const auto device_of = [](const DeviceState& t) { return t.device; };
  const std::size_t at = timeline_index.find(timelines, device, device_of);
  if (at != DeviceIndex::npos) return timelines[at];
  timelines.emplace_back().device = device;
  try {
    timeline_index.appended(timelines, device_of);
  } catch (...) {
    timelines.pop_back();
    throw;
  }
  return timelines.back();
}

void GpuAggregator::Impl::sweep_timeline(const Lookup& l) {
  const std::int64_t begin = window_begin();
  DeviceState* st = nullptr;
  std::int64_t swept_before = kNever, latest = kNever;
  // By device, then start (HeldWindow keeps that order as records arrive: no sort here).
  held.for_each_in_order([&](const HeldGpu& h) {
    if (!st || st->device != h.device) {
      if (st) st->swept_start = std::max(st->swept_start, latest);
      st = &device_state(h.device);
      swept_before = st->swept_start;
      latest = kNever;
    }
    if (h.start < swept_before) {  // its neighbours in time have been swept already
      ++late;
      return;
    }
    latest = std::max(latest, h.start);
    const std::int64_t s = std::max(h.start, begin);
    const std::int64_t e = h.end;
    if (e <= s) return;  // before the window (warm-up before the first step)
    if (!st->busy.open)
      attribute_gap(st->idle, l, begin, s, h.launch_ns);
    else if (s > st->busy.seg_end)
      attribute_gap(st->idle, l, st->busy.seg_end, s, h.launch_ns);
    st->busy.add(s, e);
    if (!step_windows.empty()) add_step_busy(h.device, s, e);
    if (h.type == HeldType::Kernel) {
      st->kernel.add(s, e);
      st->kernel_or_memcpy.add(s, e);
      (h.communication ? st->communication : st->compute).add(s, e);
    } else if (h.type == HeldType::Memcpy) {
      st->memcpy.add(s, e);
      st->kernel_or_memcpy.add(s, e);
    }
  });
  if (st) st->swept_start = std::max(st->swept_start, latest);
}

void GpuAggregator::Impl::fold(const OpInstance& op) {
  EligibleOpStats& s = ops[op.key];
  s.tensor_core_ns += op.tensor_core_ns;
  s.cuda_core_ns += op.cuda_core_ns;
  s.unknown_ns += op.unknown_ns;
  if (op.kernels > 0) {
    ++s.with_kernels;
    if (op.tensor_core_kernels == 0 && op.unknown_kernels == 0) ++s.only_cuda_cores;
  }
}

std::vector<std::pair<std::uint64_t, Launch>> GpuAggregator::Impl::owed_launches(std::size_t g) {
  std::vector<std::pair<std::uint64_t, Launch>> owed;
  if (unpaid[g] == 0) return owed;  // the common case: every launch has its GPU record
  launches[g].for_each([&](std::uint64_t id, const Launch& l) {
    if (!l.paid) owed.emplace_back(id, l);
  });
  if (owed.size() > carry_limit()) {
    const auto cut = static_cast<std::ptrdiff_t>(owed.size() - carry_limit());
    std::nth_element(owed.begin(), owed.begin() + cut, owed.end(),
                     [](const auto& a, const auto& b) { return a.second.start < b.second.start; });
    owed.erase(owed.begin(), owed.begin() + cut);
    forgotten_launches += cut;
  }
  return owed;
}

void GpuAggregator::Impl::next_generation() {
  ++generation;
  const std::size_t g = cur();  // now holds the oldest generation: reuse it
  // What the oldest generation is still owed moves into the new one.
  const std::vector<std::pair<std::uint64_t, Launch>> owed = owed_launches(g);
  std::int64_t horizon =
      latest_launch == kNever ? std::numeric_limits<std::int64_t>::max() : latest_launch;
  for (const auto& [id, l] : owed) horizon = std::min(horizon, l.start);
  // The launches carried into the other generation last time hold their ranges too (its own
  // ones fall in its own ranges, which the two-generation rule keeps).
  if (carried_last > 0) {
    launches[prev()].for_each([&](std::uint64_t, const Launch& l) {
      if (!l.paid) horizon = std::min(horizon, l.start);
    });
  }
  carried_last = owed.size();
  const std::uint32_t keep_from = generation - 1;
  // A launch whose record never comes (CUPTI dropped it) must not hold the host records without
  // bound: past carry_limit() of them, the old generations' ranges, syncs and ops go.
  std::size_t beyond = 0;
  for (const OpInstance& op : op_instances[g]) beyond += op.end >= horizon;
  for (const PhaseRange& r : ranges) beyond += r.generation < keep_from && r.end >= horizon;
  for (const HostSpan& h : host_syncs) beyond += h.generation < keep_from && h.end >= horizon;
  if (beyond > carry_limit()) horizon = std::numeric_limits<std::int64_t>::max();
  launches[g].clear();
  for (const auto& [id, l] : owed) launches[g].assign(id, l);
  unpaid[g] = owed.size();
  std::vector<OpInstance> kept;
  for (const OpInstance& op : op_instances[g]) {
    if (op.end >= horizon) {
      kept.push_back(op);
    } else {
      fold(op);
    }
  }
  op_instances[g].clear();
  op_by_external_id[g].clear();
  for (const OpInstance& op : kept) {
    if (op.external_id != 0)
      op_by_external_id[g].assign(op.external_id,
                                  static_cast<std::uint32_t>(op_instances[g].size()));
    op_instances[g].push_back(op);
  }
  // What was carried counts in the new generation's share of the host limit.
  host_added = owed.size() + (horizon == std::numeric_limits<std::int64_t>::max() ? 0 : beyond);
  std::erase_if(ranges,
                [&](const PhaseRange& r) { return r.generation < keep_from && r.end < horizon; });
  std::erase_if(host_syncs,
                [&](const HostSpan& s) { return s.generation < keep_from && s.end < horizon; });
}

void GpuAggregator::Impl::sweep() {
  if (!held.empty()) {
    const Lookup l = build_lookup();
    held.for_each([&](HeldGpu& h) { attribute(h, l); });
    sweep_timeline(l);
    held.clear();
  }
  next_generation();
}

}  // namespace fathom
