#pragma once
// The CUDA caching allocator as the device meter sees it (allocator_access.h): its counters from
// getDeviceStats, and a reading at every allocation and free from its trace tracker.
#include <c10/core/Device.h>

#include <memory>
#include <optional>

#include "framework/allocator_access.h"

namespace fathom::detail {

// The caching allocator of device when it is a CUDA device; null for none or any other.
std::unique_ptr<AllocatorAccess> make_allocator_access(const std::optional<c10::Device>& device);

}  // namespace fathom::detail
