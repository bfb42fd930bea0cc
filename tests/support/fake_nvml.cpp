// A stand-in for libnvidia-ml.so.1: one (or FAKE_NVML_DEVICES) H100-like device with scripted
// readings, so fathom's NVML adapter and `fathom doctor` run end to end on a machine without a
// GPU. FAKE_NVML_INIT=driver_not_loaded makes nvmlInit_v2 fail as it does without the kernel
// module. The PCIe throughput and NVLink calls answer "not supported", as on many cards.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" {

using nvmlReturn_t = int;
struct nvmlDevice_st {
  unsigned index;
};
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};

}  // extern "C"

namespace {

constexpr nvmlReturn_t kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kNotFound = 6,
                       kInsufficientSize = 7, kDriverNotLoaded = 9, kUninitialized = 1;
nvmlDevice_st g_devices[8] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
std::atomic<int> g_init{0};
std::atomic<unsigned long long> g_reads{0};

unsigned device_count() {
  const char* n = std::getenv("FAKE_NVML_DEVICES");
  const int v = n ? std::atoi(n) : 1;
  return v < 0 ? 0u : v > 8 ? 8u : static_cast<unsigned>(v);
}

bool valid(nvmlDevice_t d) { return g_init > 0 && d && d->index < device_count(); }

nvmlReturn_t copy_string(const std::string& s, char* out, unsigned int len) {
  if (!out || len <= s.size()) return kInsufficientSize;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return kSuccess;
}

}  // namespace

extern "C" {

#define FAKE_EXPORT __attribute__((visibility("default")))

FAKE_EXPORT nvmlReturn_t nvmlInit_v2() {
  const char* mode = std::getenv("FAKE_NVML_INIT");
  if (mode && std::string(mode) == "driver_not_loaded") return kDriverNotLoaded;
  ++g_init;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlShutdown() {
  if (g_init == 0) return kUninitialized;
  --g_init;
  return kSuccess;
}
FAKE_EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case kSuccess:
      return "Success";
    case kInvalidArgument:
      return "Invalid Argument";
    case kNotSupported:
      return "Not Supported";
    case kNotFound:
      return "Not Found";
    case kDriverNotLoaded:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}
FAKE_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* v, unsigned int len) {
  return copy_string("580.65.06", v, len);
}
FAKE_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) {
  *v = 13000;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* n) {
  if (g_init == 0) return kUninitialized;
  *n = device_count();
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  if (g_init == 0) return kUninitialized;
  if (i >= device_count()) return kInvalidArgument;
  *d = &g_devices[i];
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* id, nvmlDevice_t* d) {
  if (g_init == 0) return kUninitialized;
  if (std::string(id) != "00000000:3B:00.0" || device_count() == 0) return kNotFound;
  *d = &g_devices[0];
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int len) {
  if (!valid(d)) return kInvalidArgument;
  return copy_string("Fake H100 80GB HBM3", name, len);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int* major,
                                                            int* minor) {
  if (!valid(d)) return kInvalidArgument;
  *major = 9;
  *minor = 0;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  if (!valid(d)) return kInvalidArgument;
  const auto n = ++g_reads;
  u->gpu = n % 2 ? 80 : 40;  // 80, 40, 80, ...
  u->memory = 25;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  if (!valid(d)) return kInvalidArgument;
  m->total = 80ULL << 30;
  m->used = 10ULL << 30;
  m->free = m->total - m->used;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* mw) {
  if (!valid(d)) return kInvalidArgument;
  *mw = 350000;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int* mw) {
  if (!valid(d)) return kInvalidArgument;
  *mw = 700000;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d,
                                                             unsigned long long* mj) {
  if (!valid(d)) return kInvalidArgument;
  *mj = 1000000ULL + 500000ULL * g_reads.load();  // 500 J more for every utilization read
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int* mhz) {
  if (!valid(d)) return kInvalidArgument;
  *mhz = type == 2 ? 2619 : 1755;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned int* mhz) {
  if (!valid(d)) return kInvalidArgument;
  *mhz = type == 2 ? 2619 : 1980;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d,
                                                                unsigned long long* r) {
  if (!valid(d)) return kInvalidArgument;
  *r = g_reads.load() % 2 ? 0x4 : 0x0;  // power cap on the busy readings
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int* v) {
  if (!valid(d)) return kInvalidArgument;
  *v = 4;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int* v) {
  if (!valid(d)) return kInvalidArgument;
  *v = 16;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int* v) {
  if (!valid(d)) return kInvalidArgument;
  *v = 5;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int* v) {
  if (!valid(d)) return kInvalidArgument;
  *v = 16;
  return kSuccess;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, int, unsigned int*) {
  if (!valid(d)) return kInvalidArgument;
  return kNotSupported;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int, int*) {
  if (!valid(d)) return kInvalidArgument;
  return kNotSupported;
}

}  // extern "C"
