#include "kineto_lookalike.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <chrono>
#include <cstdlib>
#include <mutex>

namespace fathom::testing {
namespace {

KinetoLookalike* g_instance = nullptr;
std::mutex g_mutex;      // Kineto's mutex_: taken in its buffer callbacks, never around CUPTI calls
bool g_decline = false;  // under g_mutex

constexpr std::size_t kBufferBytes = 4 << 20;

}  // namespace

KinetoLookalike::KinetoLookalike(standin::Control& cupti) : cupti_(cupti) { g_instance = this; }

KinetoLookalike::~KinetoLookalike() {
  if (active_) stop();
  std::lock_guard lock(g_mutex);
  for (std::uint8_t* b : allocated_) std::free(b);  // those CUPTI still holds are lost with it
  for (auto& [b, n] : ready_) std::free(b);
  g_instance = nullptr;
}

std::uint64_t KinetoLookalike::tsc() {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
  return static_cast<std::uint64_t>(ns) * 5 / 2 + 777'000'000'000ull;
}

bool KinetoLookalike::init() {
  const CUptiResult r = cupti_.api.subscribe(&subscriber_, nullptr, nullptr);
  cpu_only_ = r != CUPTI_SUCCESS;
  return !cpu_only_;
}

void KinetoLookalike::prepare(bool tsc_timestamps, bool cuda_activities) {
  if (cpu_only_) return;
  cuda_activities_ = cuda_activities;
  if (tsc_timestamps) cupti_.register_timestamp_callback(&KinetoLookalike::tsc);
  cupti_.api.activity_register_callbacks(&KinetoLookalike::on_request,
                                         &KinetoLookalike::on_complete);
  kinds_ = {CUPTI_ACTIVITY_KIND_MEMCPY,
            CUPTI_ACTIVITY_KIND_MEMSET,
            CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
            CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
            CUPTI_ACTIVITY_KIND_RUNTIME,
            CUPTI_ACTIVITY_KIND_DRIVER,
            CUPTI_ACTIVITY_KIND_OVERHEAD};
  if (!cuda_activities)
    kinds_ = {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME,
              CUPTI_ACTIVITY_KIND_DRIVER};
  for (CUpti_ActivityKind k : kinds_) cupti_.api.activity_enable(k);
  cupti_.enable_runtime_api(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0);
  cupti_.enable_driver_api(CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute, 0);
  cupti_.enable_driver_api(CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, 0);
  active_ = true;
}

void KinetoLookalike::start() {
  if (cpu_only_) return;
  cupti_.api.activity_flush_all(0);
  std::lock_guard lock(g_mutex);
  for (auto& [b, n] : ready_) std::free(b);
  ready_.clear();
  seen_ = Seen{};
  ops_.clear();
  kernel_correlations_.clear();
}

void KinetoLookalike::stop() {
  if (cpu_only_ || !active_) {
    active_ = false;
    return;
  }
  // torch.profiler synchronizes the device before it stops the trace.
  cupti_.wait_gpu();
  cupti_.api.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind k : kinds_) cupti_.api.activity_disable(k);
  std::vector<std::pair<std::uint8_t*, std::size_t>> ready;
  {
    std::lock_guard lock(g_mutex);
    ready.swap(ready_);
  }
  for (auto& [b, n] : ready) {
    read(b, n);
    std::free(b);
  }
  // Kernels and the correlation records of their launches sit in different queues' buffers.
  for (std::uint32_t c : kernel_correlations_) {
    auto it = ops_.find(c);
    if (it != ops_.end() && pushed_.count(it->second)) ++seen_.kernels_linked_to_its_ops;
  }
  active_ = false;
}

void KinetoLookalike::push_op(std::uint64_t id) {
  if (!active_) return;
  pushed_.insert(id);
  cupti_.api.activity_push_external_correlation_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

void KinetoLookalike::pop_op() {
  if (!active_) return;
  std::uint64_t last = 0;
  cupti_.api.activity_pop_external_correlation_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

void KinetoLookalike::decline_requests(bool on) {
  std::lock_guard lock(g_mutex);
  g_decline = on;
}

void KinetoLookalike::on_request(std::uint8_t** buffer, std::size_t* size, std::size_t* max) {
  std::lock_guard lock(g_mutex);
  if (g_decline) {
    *buffer = nullptr;
    *size = 0;
    *max = 0;
    return;
  }
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max = 0;
  if (g_instance) g_instance->allocated_.insert(*buffer);
}

void KinetoLookalike::on_complete(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                                  std::size_t valid) {
  std::lock_guard lock(g_mutex);
  if (!g_instance || !g_instance->allocated_.erase(buffer)) {
    // Kineto logs "bufferCompleted called with unknown buffer" and returns: not its to free.
    if (g_instance) ++g_instance->seen_.unknown_buffers;
    return;
  }
  g_instance->ready_.emplace_back(buffer, valid);
}

void KinetoLookalike::read(std::uint8_t* buffer, std::size_t valid) {
  CUpti_Activity* record = nullptr;
  for (;;) {
    const CUptiResult r = cupti_.api.activity_get_next_record(buffer, valid, &record);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (r != CUPTI_SUCCESS) {
      ++seen_.invalid_records;
      break;
    }
    if (!kinds_.count(record->kind)) {
      ++seen_.unexpected_kind;
      continue;
    }
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        ++seen_.kernels;
        seen_.kernel_starts.push_back(k->start);
        seen_.kernel_ends.push_back(k->end);
        kernel_correlations_.push_back(k->correlationId);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        ++seen_.memcpys;
        break;
      case CUPTI_ACTIVITY_KIND_RUNTIME:
        ++seen_.runtime;
        break;
      case CUPTI_ACTIVITY_KIND_DRIVER:
        ++seen_.driver;
        break;
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
          ops_[e->correlationId] = e->externalId;
        } else if (e->externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1) {
          ++seen_.foreign_correlation;  // Kineto warns "Invalid CUpti_ActivityExternalCorrelation"
        }
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace fathom::testing
