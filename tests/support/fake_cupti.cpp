#include "fake_cupti.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <fathom/clock.h>

namespace fathom::testing {

std::size_t fake_record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return sizeof(CUpti_ActivityMemcpyPtoP4);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_MARKER:
      return sizeof(CUpti_ActivityMarker2);
    default:
      return 0;
  }
}

std::size_t ActivityBufferBuilder::copy_to(std::uint8_t* buffer, std::size_t size) const {
  const std::size_t n = std::min(size, bytes_.size());
  std::memcpy(buffer, bytes_.data(), n);
  return n;
}

CUptiResult fake_next_record(std::uint8_t* buffer, std::size_t valid_size,
                             CUpti_Activity** record) {
  if (FakeCupti::get().next_record_error != CUPTI_SUCCESS)
    return FakeCupti::get().next_record_error;
  std::size_t at = 0;
  if (*record) {
    auto* current = reinterpret_cast<std::uint8_t*>(*record);
    at = static_cast<std::size_t>(current - buffer) + fake_record_size((*record)->kind);
  }
  if (at >= valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  auto* next = reinterpret_cast<CUpti_Activity*>(buffer + at);
  const std::size_t size = fake_record_size(next->kind);
  if (size == 0) return CUPTI_ERROR_INVALID_KIND;
  if (at + size > valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = next;
  return CUPTI_SUCCESS;
}

std::uint64_t FakeCupti::now() const {
  return live_clock ? static_cast<std::uint64_t>(now_ns() + clock_shift) : timestamp;
}

FakeCupti& FakeCupti::get() {
  static FakeCupti fake;
  return fake;
}

void FakeCupti::reset() { *this = FakeCupti{}; }

std::uint32_t FakeCupti::api_call(CUpti_ActivityKind kind, std::uint32_t cbid, std::uint64_t start,
                                  std::uint64_t end) {
  const std::uint32_t id = next_correlation++;
  if (enabled.count(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
    for (auto& [k, ids] : stacks) {
      if (ids.empty()) continue;
      auto& e =
          pending.add<CUpti_ActivityExternalCorrelation>(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
      e.externalKind = k;
      e.externalId = ids.back();
      e.correlationId = id;
    }
  }
  auto& a = pending.add<CUpti_ActivityAPI>(kind);
  a.cbid = cbid;
  a.start = start;
  a.end = end;
  a.threadId = 77;
  a.correlationId = id;
  return id;
}

CUpti_ActivityKernel10& FakeCupti::kernel(const char* name, std::uint32_t correlation,
                                          std::uint64_t start, std::uint64_t end) {
  auto& k = pending.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.name = name;
  k.correlationId = correlation;
  k.start = start;
  k.end = end;
  k.streamId = 7;
  return k;
}

CUpti_ActivityMemcpy6& FakeCupti::memcpy(std::uint8_t copy_kind, std::uint8_t src, std::uint8_t dst,
                                         std::uint64_t bytes, std::uint32_t correlation,
                                         std::uint64_t start, std::uint64_t end) {
  auto& m = pending.add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  m.copyKind = copy_kind;
  m.srcKind = src;
  m.dstKind = dst;
  m.bytes = bytes;
  m.correlationId = correlation;
  m.runtimeCorrelationId = correlation;
  m.start = start;
  m.end = end;
  return m;
}

void FakeCupti::deliver_pending() {
  if (pending.empty() || !request || !complete) return;
  std::uint8_t* buffer = nullptr;
  std::size_t size = 0, max_records = 0;
  request(&buffer, &size, &max_records);
  if (!buffer || size < pending.size()) {
    // CUPTI drops what it has no room for, and counts it.
    ++refused_buffers;
    dropped_per_buffer += 1;
    pending.clear();
    return;
  }
  const std::size_t valid = pending.copy_to(buffer, size);
  pending.clear();
  complete(nullptr, 0, buffer, size, valid);
}

namespace {

FakeCupti& F() { return FakeCupti::get(); }

CUptiResult fake_result_string(CUptiResult r, const char** s) {
  switch (r) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *s = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      break;
    case CUPTI_ERROR_NOT_COMPATIBLE:
      *s = "CUPTI_ERROR_NOT_COMPATIBLE";
      break;
    case CUPTI_ERROR_UNKNOWN:
      *s = "CUPTI_ERROR_UNKNOWN";
      break;
    case CUPTI_ERROR_INVALID_KIND:
      *s = "CUPTI_ERROR_INVALID_KIND";
      break;
    case CUPTI_ERROR_NOT_INITIALIZED:
      *s = "CUPTI_ERROR_NOT_INITIALIZED";
      break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      *s = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
      break;
    default:
      return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return CUPTI_SUCCESS;
}

CUptiResult fake_version(std::uint32_t* v) {
  *v = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUptiResult fake_timestamp(std::uint64_t* t) {
  *t = F().now();
  return CUPTI_SUCCESS;
}

CUptiResult fake_callback_name(CUpti_CallbackDomain domain, std::uint32_t cbid, const char** name) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        *name = "cudaLaunchKernel_v7000";
        return CUPTI_SUCCESS;
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
        *name = "cudaMemcpyAsync_v3020";
        return CUPTI_SUCCESS;
      case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
        *name = "cudaStreamSynchronize_v3020";
        return CUPTI_SUCCESS;
      default:
        break;
    }
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        *name = "cuLaunchKernel";
        return CUPTI_SUCCESS;
      case CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent:
        *name = "cuCtxGetCurrent";
        return CUPTI_SUCCESS;
      default:
        break;
    }
  }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult fake_subscribe(CUpti_SubscriberHandle* handle, CUpti_CallbackFunc, void*) {
  ++F().subscribe_calls;
  if (F().subscribe_result != CUPTI_SUCCESS) return F().subscribe_result;
  F().subscribed = true;
  *handle = reinterpret_cast<CUpti_SubscriberHandle>(0x1);
  return CUPTI_SUCCESS;
}

CUptiResult fake_unsubscribe(CUpti_SubscriberHandle) {
  ++F().unsubscribe_calls;
  F().subscribed = false;
  return CUPTI_SUCCESS;
}

CUptiResult fake_register(CUpti_BuffersCallbackRequestFunc request,
                          CUpti_BuffersCallbackCompleteFunc complete) {
  if (F().register_result != CUPTI_SUCCESS) return F().register_result;
  F().request = request;
  F().complete = complete;
  return CUPTI_SUCCESS;
}

CUptiResult fake_enable(CUpti_ActivityKind kind) {
  auto it = F().enable_results.find(kind);
  if (it != F().enable_results.end() && it->second != CUPTI_SUCCESS) return it->second;
  F().enabled.insert(kind);
  return CUPTI_SUCCESS;
}

CUptiResult fake_disable(CUpti_ActivityKind kind) {
  F().enabled.erase(kind);
  F().disabled.push_back(kind);
  return CUPTI_SUCCESS;
}

CUptiResult fake_flush_all(std::uint32_t flag) {
  ++F().flush_calls;
  if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) ++F().forced_flush_calls;
  if (F().flush_result != CUPTI_SUCCESS) return F().flush_result;
  F().deliver_pending();
  return CUPTI_SUCCESS;
}

CUptiResult fake_dropped(CUcontext, std::uint32_t, std::size_t* dropped) {
  *dropped = F().dropped_per_buffer;
  F().dropped_per_buffer = 0;  // CUPTI resets its count when read
  return CUPTI_SUCCESS;
}

CUptiResult fake_push(CUpti_ExternalCorrelationKind kind, std::uint64_t id) {
  ++F().push_calls;
  F().stacks[kind].push_back(id);
  return CUPTI_SUCCESS;
}

CUptiResult fake_pop(CUpti_ExternalCorrelationKind kind, std::uint64_t* last) {
  ++F().pop_calls;
  auto& ids = F().stacks[kind];
  if (ids.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (last) *last = ids.back();
  ids.pop_back();
  return CUPTI_SUCCESS;
}

}  // namespace

cupti::Api fake_api() {
  cupti::Api a;
  a.get_result_string = fake_result_string;
  a.get_version = fake_version;
  a.get_timestamp = fake_timestamp;
  a.get_callback_name = fake_callback_name;
  a.subscribe = fake_subscribe;
  a.unsubscribe = fake_unsubscribe;
  a.activity_register_callbacks = fake_register;
  a.activity_enable = fake_enable;
  a.activity_disable = fake_disable;
  a.activity_flush_all = fake_flush_all;
  a.activity_get_next_record = fake_next_record;
  a.activity_get_num_dropped_records = fake_dropped;
  a.activity_push_external_correlation_id = fake_push;
  a.activity_pop_external_correlation_id = fake_pop;
  a.library = "fake";
  return a;
}

}  // namespace fathom::testing
