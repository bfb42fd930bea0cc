#include "collect/cupti/cupti_api.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <vector>

#include "base/warning_sink.h"

namespace fathom::cupti {
namespace {

constexpr int kHeaderMajor = CUPTI_API_VERSION / 10000;

// CUPTI numbered its API versions 1, 2, ... 26 before CUDA 13 and major * 10000 + minor since.
int major_of(std::uint32_t version) {
  return version >= 10000 ? static_cast<int>(version / 10000) : 0;
}

template <typename Fn>
bool resolve(void* handle, const char* symbol, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (!out) missing += missing.empty() ? symbol : std::string(", ") + symbol;
  return out != nullptr;
}

Loaded bind_api(void* handle, const std::string& where) {
  Loaded l;
  l.found = true;
  Api& a = l.api;
  std::string missing;
  resolve(handle, "cuptiGetResultString", a.get_result_string, missing);
  resolve(handle, "cuptiGetVersion", a.get_version, missing);
  resolve(handle, "cuptiGetTimestamp", a.get_timestamp, missing);
  resolve(handle, "cuptiGetCallbackName", a.get_callback_name, missing);
  resolve(handle, "cuptiSubscribe", a.subscribe, missing);
  resolve(handle, "cuptiUnsubscribe", a.unsubscribe, missing);
  resolve(handle, "cuptiActivityRegisterCallbacks", a.activity_register_callbacks, missing);
  resolve(handle, "cuptiActivityEnable", a.activity_enable, missing);
  resolve(handle, "cuptiActivityDisable", a.activity_disable, missing);
  resolve(handle, "cuptiActivityFlushAll", a.activity_flush_all, missing);
  resolve(handle, "cuptiActivityGetNextRecord", a.activity_get_next_record, missing);
  resolve(handle, "cuptiActivityGetNumDroppedRecords", a.activity_get_num_dropped_records, missing);
  resolve(handle, "cuptiActivityPushExternalCorrelationId", a.activity_push_external_correlation_id,
          missing);
  resolve(handle, "cuptiActivityPopExternalCorrelationId", a.activity_pop_external_correlation_id,
          missing);
  if (!missing.empty()) {
    l.why = where + " lacks " + missing;
    return l;
  }
  std::string optional;  // may be absent: not an error
  resolve(handle, "cuptiSubscribe_v2", a.subscribe_v2, optional);
  resolve(handle, "cuptiActivityEnableRuntimeApi", a.activity_enable_runtime_api, optional);
  resolve(handle, "cuptiActivityEnableDriverApi", a.activity_enable_driver_api, optional);
  resolve(handle, "cuptiGetThreadIdType", a.get_thread_id_type, optional);
  std::uint32_t version = 0;
  if (check(a, a.get_version(&version), "get_version", "&version") != CUPTI_SUCCESS) {
    l.why = where + ": cuptiGetVersion failed";
    return l;
  }
  if (major_of(version) != kHeaderMajor) {
    l.why = where + " is CUPTI API version " + std::to_string(version) +
            "; fathom was built with CUPTI " + std::to_string(CUPTI_API_VERSION) +
            " headers and reads only major version " + std::to_string(kHeaderMajor) +
            " activity records";
    return l;
  }
  a.library = where;
  l.ok = true;
  return l;
}

// The path of the shared object a handle refers to, for the report.
std::string path_of(void* handle, const std::string& fallback) {
  void* sym = dlsym(handle, "cuptiGetVersion");
  Dl_info info{};
  if (sym && dladdr(sym, &info) && info.dli_fname) return info.dli_fname;
  return fallback;
}

// The toolkit's per-target library folder of the machine fathom was built for.
#if defined(__aarch64__)
constexpr const char* kTargetLib = "/targets/sbsa-linux/lib";
#else
constexpr const char* kTargetLib = "/targets/x86_64-linux/lib";
#endif

// Where CUPTI may be, found at run time (no path of the build machine is compiled in): beside
// the CUDA libraries this process already loaded (a torch wheel's nvidia/cu<major>/lib, a
// toolkit's lib64), under CUDA_HOME / CUDA_PATH, then the toolkit's usual place.
int add_loaded_cuda_dir(dl_phdr_info* info, std::size_t, void* out) {
  auto* dirs = static_cast<std::vector<std::string>*>(out);
  const std::string path = info->dlpi_name ? info->dlpi_name : "";
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return 0;
  const std::string dir = path.substr(0, slash);
  const std::string name = path.substr(slash + 1);
  if (name.starts_with("libcudart.so") || name.starts_with("libcublas.so") ||
      name.starts_with("libnvrtc.so")) {
    dirs->push_back(dir);
  } else if (name.starts_with("libtorch_cuda.so")) {
    // <site-packages>/torch/lib -> <site-packages>/nvidia/...
    const std::string site = dir + "/../..";
    dirs->push_back(site + "/nvidia/cu" + std::to_string(kHeaderMajor) + "/lib");
    dirs->push_back(site + "/nvidia/cuda_cupti/lib");
  }
  return 0;
}

}  // namespace

std::vector<std::string> cupti_search_dirs() {
  std::vector<std::string> dirs;
  dl_iterate_phdr(add_loaded_cuda_dir, &dirs);
  // A toolkit keeps libcupti in lib64, or (CUDA 13's layout, and the symlinks of some images)
  // in lib or targets/<arch>-linux/lib; older ones in extras/CUPTI/lib64.
  auto toolkit = [&](const std::string& root) {
    for (const char* sub : {"/lib64", "/lib", kTargetLib, "/extras/CUPTI/lib64"})
      dirs.push_back(root + sub);
  };
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(var); root && *root) toolkit(root);
  }
  // The CUDA wheels of the active Python environment, for a process without torch (the core's
  // GPU tests): <env>/lib/python3.*/site-packages/nvidia/cu<major>/lib.
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const char* env = std::getenv(var);
    if (!env || !*env) continue;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(std::string(env) + "/lib", ec)) {
      const std::string name = e.path().filename().string();
      if (!name.starts_with("python")) continue;
      const std::string site = e.path().string() + "/site-packages";
      dirs.push_back(site + "/nvidia/cu" + std::to_string(kHeaderMajor) + "/lib");
      dirs.push_back(site + "/nvidia/cuda_cupti/lib");
    }
  }
  toolkit("/usr/local/cuda");
  std::vector<std::string> unique;
  for (auto& d : dirs)
    if (std::find(unique.begin(), unique.end(), d) == unique.end()) unique.push_back(std::move(d));
  return unique;
}

std::string cupti_function_name(std::string_view field) {
  std::string name = "cupti";
  bool upper = true;
  for (char c : field) {
    if (c == '_') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return name;
}

std::string result_text(const Api& api, CUptiResult r) noexcept {
  try {
    const char* s = nullptr;
    if (api.get_result_string && api.get_result_string(r, &s) == CUPTI_SUCCESS && s) return s;
    return "CUPTI error " + std::to_string(static_cast<int>(r));
  } catch (...) {
    return {};
  }
}

CUptiResult check(const Api& api, CUptiResult r, std::string_view field,
                  std::string_view args) noexcept {
  if (r == CUPTI_SUCCESS) return r;
  detail::warn_as(cupti_function_name(field), cupti_function_name(field), "(", args,
                  ") failed: ", result_text(api, r));
  return r;
}

Loaded load_cupti_from(const std::string& path) noexcept {
  try {
    dlerror();
    // Never closed: CUPTI keeps threads and callbacks that outlive any one collector.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = dlerror();
      Loaded l;
      l.why = err ? err : path + ": cannot be loaded";
      return l;
    }
    return bind_api(handle, path_of(handle, path));
  } catch (...) {
    return Loaded{false, false, {}, "out of memory while loading CUPTI"};
  }
}

Loaded load_cupti() noexcept {
  try {
    const std::string soname = "libcupti.so." + std::to_string(kHeaderMajor);
    // A CUPTI already in the process (torch links one for Kineto) must be the one fathom uses:
    // two copies would each believe they own the activity API.
    for (const char* name : {soname.c_str(), "libcupti.so"}) {
      if (void* handle = dlopen(name, RTLD_NOW | RTLD_NOLOAD))
        return bind_api(handle, path_of(handle, name));
    }
    // A copy that loads but is unusable (wrong version, missing functions) ends the search with
    // its reason: looking further would hide it.
    Loaded l = load_cupti_from(soname);
    if (l.ok || l.found) return l;
    std::string searched;
    for (const std::string& dir : cupti_search_dirs()) {
      l = load_cupti_from(dir + "/" + soname);
      if (l.ok || l.found) return l;
      searched += ", " + dir;
    }
    Loaded failed;
    failed.why = soname + " not found (searched the loader path" + searched + ")";
    return failed;
  } catch (...) {
    return Loaded{false, false, {}, "out of memory while loading CUPTI"};
  }
}

}  // namespace fathom::cupti
