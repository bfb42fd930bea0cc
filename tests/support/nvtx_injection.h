#pragma once
// What an NVTX tool loaded through NVTX_INJECTION64_PATH does in InitializeInjectionNvtx2: put its
// handlers for the domain API (the only one fathom uses) into NVTX's core2 function table. Shared
// by the test recorder (nvtx_recorder.cpp) and the benchmark's null tool
// (bench/nvtx_null_tool.cpp).
#include <nvtx3/nvToolsExt.h>

#include <cstdint>

namespace fathom::test {

struct NvtxDomainHandlers {
  nvtxDomainHandle_t (*domain_create)(const char*);
  void (*domain_destroy)(nvtxDomainHandle_t);
  void (*name_category)(nvtxDomainHandle_t, std::uint32_t, const char*);
  nvtxStringHandle_t (*register_string)(nvtxDomainHandle_t, const char*);
  int (*push_ex)(nvtxDomainHandle_t, const nvtxEventAttributes_t*);
  int (*pop)(nvtxDomainHandle_t);
  nvtxRangeId_t (*start_ex)(nvtxDomainHandle_t, const nvtxEventAttributes_t*);
  void (*end)(nvtxDomainHandle_t, nvtxRangeId_t);
  void (*mark_ex)(nvtxDomainHandle_t, const nvtxEventAttributes_t*);
};

// Returns 1 (the tool is attached) or 0 (NVTX then turns every call into a no-op).
inline int install_nvtx_handlers(NvtxGetExportTableFunc_t get, const NvtxDomainHandlers& h) {
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (!callbacks) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || !table) return 0;
  auto set = [&](unsigned id, auto fn) {
    if (id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  };
  set(NVTX_CBID_CORE2_DomainCreateA, h.domain_create);
  set(NVTX_CBID_CORE2_DomainDestroy, h.domain_destroy);
  set(NVTX_CBID_CORE2_DomainNameCategoryA, h.name_category);
  set(NVTX_CBID_CORE2_DomainRegisterStringA, h.register_string);
  set(NVTX_CBID_CORE2_DomainRangePushEx, h.push_ex);
  set(NVTX_CBID_CORE2_DomainRangePop, h.pop);
  set(NVTX_CBID_CORE2_DomainRangeStartEx, h.start_ex);
  set(NVTX_CBID_CORE2_DomainRangeEnd, h.end);
  set(NVTX_CBID_CORE2_DomainMarkEx, h.mark_ex);
  return 1;
}

}  // namespace fathom::test
