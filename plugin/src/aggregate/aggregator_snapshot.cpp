// The snapshot the analyses read: the tables as a GpuAggregate, sorted and totalled.
#include <fathom/gpu_records.h>

#include "aggregate/aggregator_state.h"
#include "aggregate/tensor_core_ops.h"
#include "base/thresholds.h"

namespace fathom {

GpuAggregate GpuAggregator::Impl::snapshot() {
  // Sweep what is held, but keep the host records: later GPU records may still need them.
  if (!held.empty()) {
    const Lookup l = build_lookup();
    held.for_each([&](HeldGpu& h) { attribute(h, l); });
    sweep_timeline(l);
    held.clear();
  }
  GpuAggregate a;
  a.devices = devices;
  a.kernels = kernels;
  a.memcpys = memcpys;
  a.memsets = memsets;
  a.syncs = syncs;
  a.runtime_calls = runtime_calls;
  a.phases = phases;
  a.records = records;
  a.dropped_records = dropped;
  a.late_records = late;
  a.forgotten_launches = forgotten_launches;
  a.folded_kernel_names = folded_names;
  a.folded_op_keys = folded_ops;
  a.steps = steps;
  a.step_ns = step_ns;
  a.window_from_steps = steps > 0;
  if (min_time <= max_time) {
    a.window_begin_ns = window_begin();
    a.window_end_ns = window_end();
  }
  // Pending op instances count as they stand.
  const std::vector<EligibleOpStats> saved = ops;
  for (const auto& gen : op_instances)
    for (const OpInstance& op : gen) fold(op);
  a.eligible_ops = ops;
  a.op_dtypes_recorded = op_dtypes;
  ops = saved;

  const Lookup l = build_lookup();
  for (const DeviceState& st : timelines) {
    DeviceTimelineStats t;
    t.device = st.device;
    t.busy_ns = st.busy.total();
    t.kernel_ns = st.kernel.total();
    t.compute_ns = st.compute.total();
    t.communication_ns = st.communication.total();
    t.memcpy_ns = st.memcpy.total();
    t.kernel_or_memcpy_ns = st.kernel_or_memcpy.total();
    t.idle = st.idle;
    if (st.busy.open) attribute_gap(t.idle, l, st.busy.seg_end, a.window_end_ns, kNever);
    t.idle_ns = std::max<std::int64_t>(0, a.window_ns() - t.busy_ns);
    const std::int64_t known = t.idle.data_wait_ns + t.idle.sync_ns + t.idle.host_launch_ns;
    t.idle.other_ns = std::max<std::int64_t>(0, t.idle_ns - known);
    a.timelines.push_back(t);
  }
  a.step_rows = step_rows;
  for (std::size_t i = 0; i < a.step_rows.size(); ++i)
    for (const auto& [device, u] : step_busy[i].devices) a.step_rows[i].busy_ns += u.total();
  std::sort(a.step_rows.begin(), a.step_rows.end(),
            [](const StepGpuStats& x, const StepGpuStats& y) { return x.start_ns < y.start_ns; });
  a.folded_steps = folded_steps;
  std::sort(a.timelines.begin(), a.timelines.end(),
            [](const DeviceTimelineStats& x, const DeviceTimelineStats& y) {
              return x.device < y.device;
            });
  return a;
}

}  // namespace fathom
