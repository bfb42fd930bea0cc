#include <dlfcn.h>

#include <string>

#include "collect/nvml/nvml_api.h"

namespace fathom::nvml {
namespace {

template <typename F>
void resolve(void* handle, F& fn, const char* name, const char* fallback = nullptr) {
  void* p = dlsym(handle, name);
  if (!p && fallback) p = dlsym(handle, fallback);
  fn = reinterpret_cast<F>(p);
}

}  // namespace

std::string Api::error(Return r) const {
  if (error_string) {
    if (const char* s = error_string(r))
      return std::string(s) + " (NVML error " + std::to_string(r) + ")";
  }
  return "NVML error " + std::to_string(r);
}

Library::Library(const std::string& path) {
  // RTLD_LOCAL: NVML's symbols must not satisfy anyone else's lookups in this process.
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* e = dlerror();
    why_ = path + " could not be loaded (" + (e ? e : "unknown reason") +
           "): no NVIDIA driver is installed, or its library folder is not on the loader path";
    return;
  }
  resolve(handle_, api_.init, "nvmlInit_v2", "nvmlInit");
  resolve(handle_, api_.shutdown, "nvmlShutdown");
  resolve(handle_, api_.error_string, "nvmlErrorString");
  resolve(handle_, api_.system_driver_version, "nvmlSystemGetDriverVersion");
  resolve(handle_, api_.system_cuda_driver_version, "nvmlSystemGetCudaDriverVersion_v2",
          "nvmlSystemGetCudaDriverVersion");
  resolve(handle_, api_.device_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  resolve(handle_, api_.device_by_index, "nvmlDeviceGetHandleByIndex_v2",
          "nvmlDeviceGetHandleByIndex");
  resolve(handle_, api_.device_by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2",
          "nvmlDeviceGetHandleByPciBusId");
  resolve(handle_, api_.device_name, "nvmlDeviceGetName");
  resolve(handle_, api_.device_cuda_compute_capability, "nvmlDeviceGetCudaComputeCapability");
  resolve(handle_, api_.device_utilization, "nvmlDeviceGetUtilizationRates");
  resolve(handle_, api_.device_memory, "nvmlDeviceGetMemoryInfo");
  resolve(handle_, api_.device_power_usage, "nvmlDeviceGetPowerUsage");
  resolve(handle_, api_.device_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  resolve(handle_, api_.device_total_energy, "nvmlDeviceGetTotalEnergyConsumption");
  resolve(handle_, api_.device_clock, "nvmlDeviceGetClockInfo");
  resolve(handle_, api_.device_max_clock, "nvmlDeviceGetMaxClockInfo");
  // Renamed in CUDA 12.2; drivers keep the old name as well.
  resolve(handle_, api_.device_clock_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons",
          "nvmlDeviceGetCurrentClocksThrottleReasons");
  resolve(handle_, api_.device_pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
  resolve(handle_, api_.device_pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
  resolve(handle_, api_.device_pcie_max_gen, "nvmlDeviceGetMaxPcieLinkGeneration");
  resolve(handle_, api_.device_pcie_max_width, "nvmlDeviceGetMaxPcieLinkWidth");
  resolve(handle_, api_.device_pcie_throughput, "nvmlDeviceGetPcieThroughput");
  resolve(handle_, api_.device_nvlink_state, "nvmlDeviceGetNvLinkState");
  if (!api_.init || !api_.shutdown || !api_.device_count || !api_.device_by_index) {
    why_ = path + " lacks nvmlInit_v2 / nvmlDeviceGetCount_v2: the driver is too old for fathom";
    return;
  }
  const Return r = api_.init();
  if (r != kSuccess) {
    why_ = "nvmlInit failed: " + api_.error(r) +
           (r == kErrorDriverNotLoaded ? " (the NVIDIA kernel module is not loaded)" : "");
    return;
  }
  initialised_ = true;
}

Library::~Library() {
  if (initialised_) api_.shutdown();
  // The library stays mapped: another thread may still return from a call into it, and NVML
  // itself is loaded by most CUDA processes anyway.
}

}  // namespace fathom::nvml
