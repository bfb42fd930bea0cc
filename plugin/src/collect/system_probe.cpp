// Probes what `fathom doctor` reports, by loading each library the way fathom and LibTorch do
// (dlopen by soname) and asking it its version. Nothing here throws or exits.
#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <initializer_list>
#include <string>

#include "collect/cupti/cupti_api.h"
#include "collect/doctor.h"
#include "collect/nvml/nvml_api.h"

namespace fathom {
namespace {

// Loads the first of names that loads; library names every one tried when none did.
void* load_first(std::initializer_list<const char*> names, LibraryProbe& p) {
  std::string tried, last_error;
  for (const char* n : names) {
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) {
      p.library = n;
      p.loaded = true;
      return h;
    }
    const char* e = dlerror();
    last_error = e ? e : "unknown reason";
    tried += (tried.empty() ? "" : ", ") + std::string(n);
  }
  p.library = tried;
  p.error = last_error;
  return nullptr;
}

template <typename F>
F symbol(void* handle, const char* name) {
  return handle ? reinterpret_cast<F>(dlsym(handle, name)) : nullptr;
}

void probe_driver(const ProbeOptions& o, SystemFacts& f) {
  void* h = load_first({o.driver_library.c_str()}, f.driver);
  if (!h) return;
  using GetVersion = int (*)(int*);
  using Init = int (*)(unsigned);
  using Count = int (*)(int*);
  using ErrorString = int (*)(int, const char**);
  auto version = symbol<GetVersion>(h, "cuDriverGetVersion");
  auto init = symbol<Init>(h, "cuInit");
  auto count = symbol<Count>(h, "cuDeviceGetCount");
  auto error_string = symbol<ErrorString>(h, "cuGetErrorString");
  int v = 0;
  if (version && version(&v) == 0) f.driver.version = v;
  if (!init || !count) {
    f.driver_device_error = "cuInit / cuDeviceGetCount missing from " + f.driver.library;
    return;
  }
  const int r = init(0);
  if (r != 0) {
    const char* text = nullptr;
    if (error_string) error_string(r, &text);
    f.driver_device_error =
        "cuInit failed: " + std::string(text ? text : "") + " (CUresult " + std::to_string(r) + ")";
    return;
  }
  int n = 0;
  if (count(&n) == 0) f.driver_device_count = n;
}

void probe_runtime(SystemFacts& f) {
  void* h = load_first({"libcudart.so.13", "libcudart.so.12", "libcudart.so"}, f.runtime);
  if (!h) return;
  using GetVersion = int (*)(int*);
  using Count = int (*)(int*);
  using ErrorString = const char* (*)(int);
  auto version = symbol<GetVersion>(h, "cudaRuntimeGetVersion");
  auto count = symbol<Count>(h, "cudaGetDeviceCount");
  auto error_string = symbol<ErrorString>(h, "cudaGetErrorString");
  int v = 0;
  if (version && version(&v) == 0) f.runtime.version = v;
  if (!count) return;
  int n = 0;
  const int r = count(&n);
  if (r == 0) {
    f.runtime_device_count = n;
  } else {
    const char* text = error_string ? error_string(r) : nullptr;
    f.runtime_device_error = "cudaGetDeviceCount: " + std::string(text ? text : "error") +
                             " (cudaError " + std::to_string(r) + ")";
  }
}

void probe_cudnn(SystemFacts& f) {
  void* h = load_first({"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"}, f.cudnn);
  if (auto version = symbol<std::size_t (*)()>(h, "cudnnGetVersion"))
    f.cudnn.version = static_cast<std::int64_t>(version());
}

// The collector's own search (cupti::load_cupti), so doctor says CUPTI is fine exactly when
// collection can load it: the copy already in the process, the loader's path, the folders beside
// the loaded CUDA libraries, with the same version check.
void probe_cupti(SystemFacts& f) {
  const cupti::Loaded l = cupti::load_cupti();
  f.cupti.loaded = l.ok;
  f.cupti.library = l.ok ? l.api.library : "libcupti";
  f.cupti.error = l.why;
  std::uint32_t v = 0;
  if (l.ok && l.api.get_version && l.api.get_version(&v) == CUPTI_SUCCESS) f.cupti.version = v;
}

// The driver's profiling restriction (NVreg_RestrictProfilingToAdminUsers), as it exposes it.
void probe_profiling_permission(const ProbeOptions& o, SystemFacts& f) {
  f.is_root = geteuid() == 0;
  std::ifstream in(o.driver_params);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("RmProfilingAdminOnly:", 0) == 0) {
      f.profiling_admin_only = line.find('1') != std::string::npos;
      return;
    }
  }
}

void probe_nvml(const ProbeOptions& o, SystemFacts& f) {
  nvml::Library lib(o.nvml_library);
  f.nvml.library = o.nvml_library;
  if (!lib.ok()) {
    f.nvml.error = lib.why();
    return;
  }
  f.nvml.loaded = true;
  const nvml::Api& api = lib.api();
  char text[nvml::kDriverVersionBufferSize] = {};
  if (api.system_driver_version && api.system_driver_version(text, sizeof text) == nvml::kSuccess)
    f.driver_version = text;
  int cuda = 0;
  if (api.system_cuda_driver_version && api.system_cuda_driver_version(&cuda) == nvml::kSuccess)
    f.nvml.version = cuda;
  unsigned int count = 0;
  if (const nvml::Return r = api.device_count(&count); r != nvml::kSuccess) {
    f.nvml.error = "nvmlDeviceGetCount: " + api.error(r);
    return;
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvml::Device d = nullptr;
    if (api.device_by_index(i, &d) != nvml::kSuccess) continue;
    GpuFacts g;
    g.index = static_cast<int>(i);
    char name[nvml::kDeviceNameBufferSize] = {};
    if (api.device_name && api.device_name(d, name, sizeof name) == nvml::kSuccess) g.name = name;
    if (api.device_cuda_compute_capability)
      api.device_cuda_compute_capability(d, &g.compute_major, &g.compute_minor);
    nvml::Memory m{};
    if (api.device_memory && api.device_memory(d, &m) == nvml::kSuccess)
      g.memory_bytes = static_cast<std::int64_t>(m.total);
    auto read = [&](auto fn, std::optional<int>& out) {
      unsigned int v = 0;
      if (fn && fn(d, &v) == nvml::kSuccess) out = static_cast<int>(v);
    };
    read(api.device_pcie_gen, g.pcie_gen);
    read(api.device_pcie_width, g.pcie_width);
    read(api.device_pcie_max_gen, g.pcie_max_gen);
    read(api.device_pcie_max_width, g.pcie_max_width);
    if (api.device_nvlink_state) {
      int up = 0;
      for (unsigned int link = 0; link < nvml::kNvLinkMaxLinks; ++link) {
        int state = 0;
        if (api.device_nvlink_state(d, link, &state) == nvml::kSuccess && state) ++up;
      }
      g.nvlinks_active = up;
    }
    f.gpus.push_back(std::move(g));
  }
}

}  // namespace

SystemFacts probe_system(const ProbeOptions& o) {
  SystemFacts f;
  try {
    probe_driver(o, f);
    probe_runtime(f);
    probe_cudnn(f);
    probe_cupti(f);
    probe_profiling_permission(o, f);
    probe_nvml(o, f);
  } catch (const std::exception&) {
    // Only allocation failures can throw here; the facts gathered so far stand.
  }
  return f;
}

}  // namespace fathom
