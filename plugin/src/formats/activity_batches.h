#pragma once
// Batches of records joined into one GpuActivity: what the readers' whole-file loaders
// (load_activity, load_nsight_export) do with the batches their streaming readers hand out.
#include <fathom/gpu_records.h>

#include <cstdint>
#include <iterator>
#include <limits>
#include <utility>

namespace fathom::detail {

inline void append_batch(GpuActivity& all, GpuActivity&& b) {
  auto move_into = [](auto& to, auto& from) {
    if (to.empty())
      to = std::move(from);
    else
      to.insert(to.end(), std::make_move_iterator(from.begin()),
                std::make_move_iterator(from.end()));
  };
  move_into(all.devices, b.devices);
  move_into(all.kernels, b.kernels);
  move_into(all.memcpys, b.memcpys);
  move_into(all.memsets, b.memsets);
  move_into(all.syncs, b.syncs);
  move_into(all.runtime_calls, b.runtime_calls);
  move_into(all.ops, b.ops);
  move_into(all.annotations, b.annotations);
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  all.dropped_records = b.dropped_records > kMax - all.dropped_records
                            ? kMax
                            : all.dropped_records + b.dropped_records;
}

}  // namespace fathom::detail
