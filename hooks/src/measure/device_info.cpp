#include "measure/device_info.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include <cstdio>

#include "collect/host_info.h"

namespace fathom::detail {

DeviceInfo probe_device() {
  DeviceInfo info;
  bool cuda = false;
  try {
    cuda = torch::cuda::is_available();
  } catch (const std::exception&) {
    cuda = false;
  }
  if (!cuda) {
    info.label = "cpu";
    info.name = cpu_model();
    const std::string why = "no CUDA device (torch::cuda::is_available() is false)";
    info.not_measured = {
        {"device time per phase", why},
        {"device memory per phase (caching allocator)", why},
        {"GPU kernels, transfers and Tensor Core use (CUPTI)", why},
        {"device telemetry (NVML: utilization, power, clocks, PCIe link)", why},
    };
    return info;
  }
  const c10::Device current = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice();
  info.device = current;
  info.label = current.str();
  try {
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(current.index());
    info.name = prop->name;
    // NVML names devices by PCI bus id: CUDA and NVML number them differently under
    // CUDA_VISIBLE_DEVICES.
    char bus[32];
    std::snprintf(bus, sizeof bus, "%08x:%02x:%02x.0", prop->pciDomainID, prop->pciBusID,
                  prop->pciDeviceID);
    info.pci_bus_id = bus;
    info.memory_bytes = static_cast<std::int64_t>(
        c10::getDeviceAllocator(c10::DeviceType::CUDA)->getMemoryInfo(current.index()).second);
  } catch (const std::exception& e) {
    info.not_measured.push_back({"device name and memory size", e.what()});
  }
  // CUPTI's status (collecting, off, busy with another tool, unavailable) is reported by the
  // session's CUPTI extension (cupti_extension.cpp).
  return info;
}

}  // namespace fathom::detail
