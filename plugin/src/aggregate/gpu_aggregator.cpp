#include "aggregate/gpu_aggregator.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "aggregate/aggregator_state.h"
#include "aggregate/tensor_core_ops.h"
#include "base/thresholds.h"

namespace fathom {
// (helpers: aggregator_state.h)

GpuAggregator::GpuAggregator(AggregatorLimits limits) : impl_(std::make_unique<Impl>(limits)) {}
GpuAggregator::~GpuAggregator() = default;
GpuAggregator::GpuAggregator(GpuAggregator&&) noexcept = default;
GpuAggregator& GpuAggregator::operator=(GpuAggregator&&) noexcept = default;

void GpuAggregator::add(const DeviceProperties& r) noexcept {
  impl_->guarded([&] {
    const auto id_of = [](const DeviceProperties& d) { return d.id; };
    if (impl_->device_index.find(impl_->devices, r.id, id_of) != DeviceIndex::npos) return;
    impl_->devices.push_back(r);
    try {
      impl_->device_index.appended(impl_->devices, id_of);
    } catch (...) {
      impl_->devices.pop_back();
      throw;
    }
  });
}
void GpuAggregator::add(const KernelRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_kernel(r); });
}
void GpuAggregator::add(const MemcpyRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_memcpy(r); });
}
void GpuAggregator::add(const MemsetRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_memset(r); });
}
void GpuAggregator::add(const SyncRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_sync(r); });
}
void GpuAggregator::add(const RuntimeCallRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_runtime(r); });
}
void GpuAggregator::add(const OpRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_op(r); });
}
void GpuAggregator::add(const AnnotationRecord& r) noexcept {
  impl_->guarded([&] { impl_->add_annotation(r); });
}

void GpuAggregator::add(const GpuActivity& batch) noexcept {
  for (const auto& r : batch.devices) add(r);
  for (const auto& r : batch.annotations) add(r);
  for (const auto& r : batch.ops) add(r);
  for (const auto& r : batch.runtime_calls) add(r);
  for (const auto& r : batch.syncs) add(r);
  try {
    // The GPU records that will be held before the window is full: room for them at once.
    // A few devices (a corrupted trace may name thousands: then nothing is reserved).
    constexpr std::size_t kDevices = 64;
    std::vector<std::pair<std::int32_t, std::size_t>> per_device;
    bool few = true;
    auto count = [&](std::int32_t device) {
      auto it = std::find_if(per_device.begin(), per_device.end(),
                             [&](const auto& d) { return d.first == device; });
      if (it != per_device.end())
        ++it->second;
      else if (per_device.size() < kDevices)
        per_device.emplace_back(device, 1);
      else
        few = false;
    };
    for (const auto& r : batch.kernels) count(r.device);
    for (const auto& r : batch.memcpys) count(r.device);
    for (const auto& r : batch.memsets) count(r.device);
    const std::size_t room =
        impl_->limits.window_records - std::min(impl_->held.size(), impl_->limits.window_records);
    if (few)
      for (const auto& [device, n] : per_device) impl_->held.reserve(device, std::min(n, room));
  } catch (...) {
    // No memory to reserve: the records are held as they come, or counted as dropped.
  }
  for (const auto& r : batch.kernels) add(r);
  for (const auto& r : batch.memcpys) add(r);
  for (const auto& r : batch.memsets) add(r);
  add_dropped(batch.dropped_records);
}

void GpuAggregator::add_dropped(std::int64_t n) noexcept {
  if (n > 0) impl_->dropped += n;
}

void GpuAggregator::flush() noexcept {
  try {
    impl_->sweep();
  } catch (...) {
    // Out of memory while sweeping: the held records are lost, and counted.
    impl_->dropped += static_cast<std::int64_t>(impl_->held.size());
    impl_->held.clear();
  }
}

GpuAggregate GpuAggregator::snapshot() { return impl_->snapshot(); }

std::size_t GpuAggregator::held_records() const noexcept {
  return impl_->held.size() + impl_->host_held();
}

std::int64_t GpuAggregator::device_lookup_steps() const noexcept {
  std::int64_t steps =
      impl_->device_index.steps() + impl_->timeline_index.steps() + impl_->held.lookup_steps();
  for (const StepBusy& row : impl_->step_busy) steps += row.index.steps();
  return steps;
}

bool is_launch_call(std::string_view name) noexcept {
  auto has = [&](std::string_view t) { return name.find(t) != std::string_view::npos; };
  return has("LaunchKernel") || has("cuLaunch") || has("LaunchCooperativeKernel") ||
         has("GraphLaunch");
}

bool launches_gpu_work(std::string_view name) noexcept {
  auto has = [&](std::string_view t) { return name.find(t) != std::string_view::npos; };
  return is_launch_call(name) || has("Memcpy") || has("Memset");
}

bool is_host_sync_call(std::string_view name) noexcept {
  if (name.find("Synchronize") != std::string_view::npos) return true;
  // cudaMemcpy / cuMemcpyDtoH...: the synchronous copies block the host until they are done.
  const bool copy = name.substr(0, 10) == "cudaMemcpy" || name.substr(0, 8) == "cuMemcpy";
  return copy && name.find("Async") == std::string_view::npos;
}

GpuAggregate aggregate(const GpuActivity& activity, std::size_t step_rows) {
  // Everything is in memory already: one sweep sees every record's neighbours.
  AggregatorLimits limits;
  limits.step_rows = step_rows;
  const std::size_t gpu =
      activity.kernels.size() + activity.memcpys.size() + activity.memsets.size();
  const std::size_t host = activity.runtime_calls.size() + activity.ops.size() +
                           activity.annotations.size() + activity.syncs.size();
  limits.window_records = std::max(limits.window_records, gpu + 1);
  limits.host_records = std::max(limits.host_records, 2 * host + 2);
  GpuAggregator agg(limits);
  agg.add(activity);
  return agg.snapshot();
}

}  // namespace fathom
