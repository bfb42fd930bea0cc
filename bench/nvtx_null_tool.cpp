// An NVTX tool that takes every range fathom emits and drops it: the least any real tool (Nsight
// Systems) can cost. Load it with NVTX_INJECTION64_PATH=.../libfathom_nvtx_null_tool.so to measure
// what fathom's ranges cost their caller when somebody listens; without a tool fathom registers no
// op callback at all.
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdint>

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

template <typename F>
void set(NvtxFunctionTable table, unsigned size, unsigned id, F fn) {
  if (id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get) {
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (!callbacks) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || !table) return 0;
  set(table, size, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
  set(table, size, NVTX_CBID_CORE2_DomainDestroy, &domain_destroy);
  set(table, size, NVTX_CBID_CORE2_DomainNameCategoryA, &name_category);
  set(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string);
  set(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &push_ex);
  set(table, size, NVTX_CBID_CORE2_DomainRangePop, &pop);
  set(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, &start_ex);
  set(table, size, NVTX_CBID_CORE2_DomainRangeEnd, &end);
  set(table, size, NVTX_CBID_CORE2_DomainMarkEx, &mark_ex);
  return 1;
}
