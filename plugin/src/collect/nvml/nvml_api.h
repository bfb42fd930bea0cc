#pragma once
// The few NVML functions fathom calls, declared here (no nvml.h is needed to build fathom) and
// resolved with dlopen/dlsym from the driver's libnvidia-ml.so.1 at run time. Types and values
// follow NVML's public ABI (nvml.h, stable since NVML 4).
#include <cstdint>
#include <string>

namespace fathom::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorFunctionNotFound =
    13;  // also what fathom reports for a missing symbol

struct DeviceOpaque;
using Device = DeviceOpaque*;  // nvmlDevice_t

struct Utilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
struct Memory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

enum ClockType : int { kClockGraphics = 0, kClockSm = 1, kClockMem = 2 };  // nvmlClockType_t
enum PcieCounter : int { kPcieTxBytes = 0, kPcieRxBytes = 1 };             // nvmlPcieUtilCounter_t
inline constexpr unsigned int kNvLinkMaxLinks = 18;                        // NVML_NVLINK_MAX_LINKS
inline constexpr unsigned int kDeviceNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned int kDriverVersionBufferSize = 80;

// Function pointers; any may be null when the library is older than the function.
struct Api {
  Return (*init)() = nullptr;  // nvmlInit_v2
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*system_driver_version)(char*, unsigned int) = nullptr;
  Return (*system_cuda_driver_version)(int*) = nullptr;
  Return (*device_count)(unsigned int*) = nullptr;                 // _v2
  Return (*device_by_index)(unsigned int, Device*) = nullptr;      // _v2
  Return (*device_by_pci_bus_id)(const char*, Device*) = nullptr;  // _v2
  Return (*device_name)(Device, char*, unsigned int) = nullptr;
  Return (*device_cuda_compute_capability)(Device, int*, int*) = nullptr;
  Return (*device_utilization)(Device, Utilization*) = nullptr;
  Return (*device_memory)(Device, Memory*) = nullptr;
  Return (*device_power_usage)(Device, unsigned int*) = nullptr;         // mW
  Return (*device_power_limit)(Device, unsigned int*) = nullptr;         // enforced, mW
  Return (*device_total_energy)(Device, unsigned long long*) = nullptr;  // mJ
  Return (*device_clock)(Device, int, unsigned int*) = nullptr;          // MHz
  Return (*device_max_clock)(Device, int, unsigned int*) = nullptr;      // MHz
  Return (*device_clock_event_reasons)(Device, unsigned long long*) = nullptr;
  Return (*device_pcie_gen)(Device, unsigned int*) = nullptr;
  Return (*device_pcie_width)(Device, unsigned int*) = nullptr;
  Return (*device_pcie_max_gen)(Device, unsigned int*) = nullptr;
  Return (*device_pcie_max_width)(Device, unsigned int*) = nullptr;
  Return (*device_pcie_throughput)(Device, int, unsigned int*) = nullptr;  // KB/s
  Return (*device_nvlink_state)(Device, unsigned int, int*) = nullptr;     // nvmlEnableState_t

  std::string error(Return r) const;  // NVML's own text, or the number
};

// A loaded and initialised NVML. Shuts NVML down and unloads it when destroyed.
class Library {
 public:
  // Loads path (a soname or a file) and calls nvmlInit_v2. Never throws: on failure, ok() is
  // false and why() says what was missing.
  explicit Library(const std::string& path = "libnvidia-ml.so.1");
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  bool ok() const noexcept { return initialised_; }
  const std::string& why() const noexcept { return why_; }
  const Api& api() const noexcept { return api_; }

 private:
  void* handle_ = nullptr;
  bool initialised_ = false;
  std::string why_;
  Api api_;
};

}  // namespace fathom::nvml
