#include "measure/cuda_allocator_access.h"

#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>
#include <string>

#include "base/warning_sink.h"

namespace fathom::detail {
namespace {

namespace cca = c10::cuda::CUDACachingAllocator;
using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::TraceEntry;

constexpr auto kAggregate = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);

AllocatorReading reading_of(c10::DeviceIndex device, const DeviceStats& s) noexcept {
  const auto& allocated = s.allocated_bytes[kAggregate];
  return AllocatorReading{device,
                          allocated.current,
                          allocated.allocated,
                          allocated.freed,
                          s.reserved_bytes[kAggregate].current,
                          s.num_alloc_retries,
                          s.num_ooms};
}

// The one way c10 errors reach the report: the first line, without the C++ backtrace.
std::string reason(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10_error ? c10_error->what_without_backtrace() : e.what();
  return text.substr(0, text.find('\n'));
}

// The actions around which c10 changes allocated or reserved bytes (CUDACachingAllocator.cpp:
// alloc_found_block, free, alloc_block, release_block, map_block, unmap_block). FREE_COMPLETED
// (a deferred free reaching the pool), OOM and SNAPSHOT change neither.
bool moves_counters(TraceEntry::Action a) noexcept {
  switch (a) {
    case TraceEntry::ALLOC:
    case TraceEntry::FREE_REQUESTED:
    case TraceEntry::SEGMENT_ALLOC:
    case TraceEntry::SEGMENT_FREE:
    case TraceEntry::SEGMENT_MAP:
    case TraceEntry::SEGMENT_UNMAP:
      return true;
    default:
      return false;
  }
}

struct Route {
  MemoryPeakTracker* tracker;
  // The allocator that calls forward(): its counters, even if another is made current later.
  cca::CUDAAllocator* allocator;
};

// c10 offers no way to detach a trace tracker, so fathom attaches one forwarder for the life of
// the process and points it at the session that follows the allocator: with none, an allocation
// costs the allocator one load of this pointer.
std::atomic<const Route*> g_route{nullptr};

// Called by the allocator under the lock of te.device_'s DeviceCachingAllocator, on the thread
// that allocates: tiny, takes no other lock of c10's, allocates nothing from the device, never
// throws. That lock is a recursive mutex and getDeviceStats takes only it (getStats), so reading
// the counters from here cannot deadlock.
void forward(const TraceEntry& te) noexcept {
  const Route* route = g_route.load(std::memory_order_acquire);
  if (route == nullptr || te.device_ != route->tracker->device() || !moves_counters(te.action_))
    return;
  try {
    route->tracker->observe(reading_of(te.device_, route->allocator->getDeviceStats(te.device_)));
  } catch (...) {
    // One missed reading can only make a peak come out low.
    detail::swallowed("measure/cuda_allocator_access.cpp");
  }
}

// Attaches forward() once; returns why not when the allocator cannot take it.
std::string attach_forwarder(cca::CUDAAllocator* allocator) {
  static std::mutex mutex;
  static cca::CUDAAllocator* attached_to = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (attached_to == allocator) return {};
  if (attached_to != nullptr)
    return "the CUDA allocator was replaced after fathom started following the first one";
  const std::string name = allocator->name();
  if (name != "native")
    return "the CUDA allocator backend is '" + name +
           "', which reports no allocations to trace trackers (the native caching allocator "
           "does; fathom will not reset the allocator's peaks instead)";
  // The allocator attaches trackers to the per-device allocators it already has, and creates
  // them when CUDA is first initialized: before that, the tracker would go nowhere.
  if (!allocator->initialized()) at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  if (!allocator->initialized()) return "the CUDA caching allocator is not initialized";
  allocator->attachAllocatorTraceTracker(&forward);
  attached_to = allocator;
  return {};
}

class CudaFollow final : public AllocatorFollow {
 public:
  explicit CudaFollow(std::unique_ptr<Route> route) noexcept : route_(std::move(route)) {}
  CudaFollow(const CudaFollow&) = delete;
  CudaFollow& operator=(const CudaFollow&) = delete;

  // Points the forwarder at this route; false when another session's route is there.
  bool publish() noexcept {
    const Route* none = nullptr;
    published_ = g_route.compare_exchange_strong(none, route_.get(), std::memory_order_acq_rel);
    return published_;
  }

  ~CudaFollow() override {
    if (!published_) return;
    g_route.store(nullptr, std::memory_order_release);
    // forward() holds a device's allocator lock while it uses the route: once each device's lock
    // has been taken and let go after the store above, none can still be using it.
    const c10::DeviceIndex devices = c10::cuda::device_count();
    for (c10::DeviceIndex d = 0; d < devices; ++d) {
      try {
        (void)route_->allocator->getDeviceStats(d);
      } catch (...) {
        detail::swallowed("measure/cuda_allocator_access.cpp");
      }
    }
  }

 private:
  std::unique_ptr<Route> route_;
  bool published_ = false;
};

class CudaAllocatorAccess final : public AllocatorAccess {
 public:
  explicit CudaAllocatorAccess(c10::DeviceIndex device) noexcept
      : device_(device), allocator_(cca::get()) {}

  int device() const noexcept override { return device_; }

  std::optional<AllocatorReading> read() noexcept override {
    try {
      return reading_of(device_, allocator_->getDeviceStats(device_));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

  FollowResult follow(MemoryPeakTracker& tracker) noexcept override {
    FollowResult result;
    try {
      result.why_not = attach_forwarder(allocator_);
      if (!result.why_not.empty()) return result;
      auto follow =
          std::make_unique<CudaFollow>(std::make_unique<Route>(Route{&tracker, allocator_}));
      if (!follow->publish()) {
        result.why_not = "another fathom session in this process is following the allocator";
        return result;
      }
      result.follow = std::move(follow);
    } catch (const std::exception& e) {
      try {
        result.why_not = "the CUDA caching allocator cannot be followed: " + reason(e);
      } catch (...) {
        detail::swallowed("measure/cuda_allocator_access.cpp");
      }
    }
    return result;
  }

 private:
  c10::DeviceIndex device_;
  cca::CUDAAllocator* allocator_;
};

}  // namespace

std::unique_ptr<AllocatorAccess> make_allocator_access(const std::optional<c10::Device>& device) {
  if (!device || !device->is_cuda()) return nullptr;
  return std::make_unique<CudaAllocatorAccess>(device->index());
}

}  // namespace fathom::detail
