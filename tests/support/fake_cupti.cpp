#include "fake_cupti.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include "cupti_record_sizes.h"

namespace fathom::testing {

std::size_t fake_record_size(CUpti_ActivityKind kind) { return cupti_record_size(kind); }

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

FakeCupti& FakeCupti::get() {
  static FakeCupti fake;
  return fake;
}

void FakeCupti::reset() { *this = FakeCupti{}; }

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
      case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
        *name = "cuGraphLaunch";
        return CUPTI_SUCCESS;
      default:
        break;
    }
  }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult fake_enable(CUpti_ActivityKind kind) {
  auto it = F().enable_results.find(kind);
  if (it != F().enable_results.end() && it->second != CUPTI_SUCCESS) return it->second;
  F().enabled.insert(kind);
  return CUPTI_SUCCESS;
}

}  // namespace

cupti::Api fake_api() {
  cupti::Api a;
  a.get_result_string = fake_result_string;
  a.get_version = fake_version;
  a.get_callback_name = fake_callback_name;
  a.activity_enable = fake_enable;
  a.activity_get_next_record = fake_next_record;
  a.library = "fake";
  return a;
}

}  // namespace fathom::testing
