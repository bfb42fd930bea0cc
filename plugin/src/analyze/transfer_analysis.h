#pragma once
// Copies between host and device: bytes, time and achieved bandwidth per direction against the
// link's theoretical peak, pageable vs pinned host memory, synchronous vs asynchronous calls,
// the share of the window they occupy and how much of them ran while kernels ran.
#include <fathom/gpu_analysis.h>

#include <string>
#include <string_view>

#include "base/pcie_link.h"

namespace fathom {

struct GpuAggregate;

TransferResult analyze_transfers(const GpuAggregate& a, const LinkPeak& link = {});

}  // namespace fathom
