// An NVTX tool that takes every range fathom emits and drops it: the least any real tool (Nsight
// Systems) can cost. Load it with NVTX_INJECTION64_PATH=.../libfathom_nvtx_null_tool.so to measure
// what fathom's ranges cost their caller when somebody listens; without a tool fathom registers no
// op callback at all.
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdint>

#include "nvtx_injection.h"

namespace {

std::atomic<std::uint64_t> next_id{1};
int domain_tag;
int string_tag;

nvtxDomainHandle_t domain_create(const char*) {
  return reinterpret_cast<nvtxDomainHandle_t>(&domain_tag);
}
void domain_destroy(nvtxDomainHandle_t) {}
void name_category(nvtxDomainHandle_t, std::uint32_t, const char*) {}
nvtxStringHandle_t register_string(nvtxDomainHandle_t, const char*) {
  return reinterpret_cast<nvtxStringHandle_t>(&string_tag);
}
int push_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t*) { return 0; }
int pop(nvtxDomainHandle_t) { return 0; }
nvtxRangeId_t start_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t*) {
  return next_id.fetch_add(1, std::memory_order_relaxed);
}
void end(nvtxDomainHandle_t, nvtxRangeId_t) {}
void mark_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t*) {}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get) {
  return fathom::test::install_nvtx_handlers(
      get, {&domain_create, &domain_destroy, &name_category, &register_string, &push_ex, &pop,
            &start_ex, &end, &mark_ex});
}
