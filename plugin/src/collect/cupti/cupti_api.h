#pragma once
// The CUPTI functions fathom uses, as a plain struct of function pointers. The real one comes
// from libcupti loaded at run time (load_cupti), so fathom loads and runs where CUPTI is
// absent; tests fill the struct with fakes. Internal to the core: includes CUPTI's headers.
#include <cupti.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fathom::cupti {

struct Api {
  CUptiResult (*get_result_string)(CUptiResult, const char**) = nullptr;
  CUptiResult (*get_version)(std::uint32_t*) = nullptr;
  CUptiResult (*get_timestamp)(std::uint64_t*) = nullptr;
  CUptiResult (*get_callback_name)(CUpti_CallbackDomain, std::uint32_t, const char**) = nullptr;
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*activity_register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                             CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*activity_enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*activity_disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*activity_flush_all)(std::uint32_t) = nullptr;
  CUptiResult (*activity_get_next_record)(std::uint8_t*, std::size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*activity_get_num_dropped_records)(CUcontext, std::uint32_t, std::size_t*) = nullptr;
  CUptiResult (*activity_push_external_correlation_id)(CUpti_ExternalCorrelationKind,
                                                       std::uint64_t) = nullptr;
  CUptiResult (*activity_pop_external_correlation_id)(CUpti_ExternalCorrelationKind,
                                                      std::uint64_t*) = nullptr;
  // Optional: fathom works without them, with less (a probe that cannot name the holder, every
  // runtime and driver call recorded and filtered, thread ids assumed of the default type).
  CUptiResult (*subscribe_v2)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                              CUpti_SubscriberParams*) = nullptr;
  CUptiResult (*activity_enable_runtime_api)(CUpti_CallbackId, std::uint8_t) = nullptr;
  CUptiResult (*activity_enable_driver_api)(CUpti_CallbackId, std::uint8_t) = nullptr;
  CUptiResult (*get_thread_id_type)(CUpti_ActivityThreadIdType*) = nullptr;
  std::string library;  // where the functions came from: a path, or "fake" in tests
};

// Outcome of looking for libcupti.
struct Loaded {
  bool ok = false;
  bool found = false;  // a library was loaded, though perhaps not usable
  Api api;
  std::string why;  // when !ok: what was searched, what failed
};

// Finds libcupti (the copy already in the process first, e.g. torch's, then the loader's search
// path, then the toolkit and wheel folders known at build time) and resolves every function.
// Refuses a library whose CUPTI major version differs from the headers fathom was built with:
// the activity record layouts would not match. Never throws.
Loaded load_cupti() noexcept;
// Where load_cupti looks after the loader's own path, found at run time (nothing of the build
// machine is compiled in): beside the CUDA libraries already loaded (a torch wheel's
// nvidia/cu<major>/lib, a toolkit's lib64), under CUDA_HOME and CUDA_PATH, then /usr/local/cuda.
std::vector<std::string> cupti_search_dirs();
// The same, from one given path only (tests; a user-chosen copy).
Loaded load_cupti_from(const std::string& path) noexcept;

// "CUPTI_ERROR_NOT_INITIALIZED (CUPTI could not be initialized ...)" where the library says.
std::string result_text(const Api& api, CUptiResult r) noexcept;

// The one checked path every CUPTI call takes: on failure it logs the call (CUPTI's name for
// the function, then its arguments) and its error string to stderr, and returns the status.
// Never throws. field: the Api member, "activity_enable" -> cuptiActivityEnable.
CUptiResult check(const Api& api, CUptiResult r, std::string_view field,
                  std::string_view args) noexcept;

// CUPTI's name of an Api member: "activity_flush_all" -> "cuptiActivityFlushAll".
std::string cupti_function_name(std::string_view field);

}  // namespace fathom::cupti

// FATHOM_CUPTI(api, activity_enable, CUPTI_ACTIVITY_KIND_MEMCPY) calls api.activity_enable(...)
// through check(). A function the Api lacks answers CUPTI_ERROR_API_NOT_IMPLEMENTED.
#define FATHOM_CUPTI(api, fn, ...)                                                                \
  ::fathom::cupti::check((api),                                                                   \
                         (api).fn ? (api).fn(__VA_ARGS__) : CUPTI_ERROR_API_NOT_IMPLEMENTED, #fn, \
                         #__VA_ARGS__)
