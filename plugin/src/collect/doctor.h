#pragma once
// `fathom doctor`: what this machine gives fathom to measure with (NVIDIA driver, CUDA runtime,
// cuDNN, CUPTI and its permissions, NVML, each GPU), and for each problem the fix. Probing loads
// the libraries with dlopen and never throws; diagnosing is a pure function of the facts, so it
// is tested on made-up machines.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fathom {

struct LibraryProbe {
  std::string library;  // what loaded, or the names tried
  bool loaded = false;
  std::string error;                    // why it did not load, or why its version call failed
  std::optional<std::int64_t> version;  // as the library encodes it (CUDA: 13000 = 13.0)
};

struct GpuFacts {
  int index = 0;
  std::string name;
  int compute_major = 0;  // 0: unknown
  int compute_minor = 0;
  std::optional<std::int64_t> memory_bytes;
  std::optional<int> pcie_gen, pcie_width, pcie_max_gen, pcie_max_width;
  std::optional<int> nvlinks_active;
};

struct SystemFacts {
  LibraryProbe driver;  // libcuda.so.1; version = cuDriverGetVersion
  std::optional<int> driver_device_count;
  std::string driver_device_error;  // cuInit / cuDeviceGetCount failure
  std::string driver_version;       // "580.65.06" (NVML)
  LibraryProbe runtime;             // libcudart; version = cudaRuntimeGetVersion
  std::optional<int> runtime_device_count;
  std::string runtime_device_error;
  LibraryProbe cudnn;                        // version = cudnnGetVersion (91000 = 9.10.0)
  LibraryProbe cupti;                        // version = cuptiGetVersion (the CUPTI API version)
  std::optional<bool> profiling_admin_only;  // the driver's RmProfilingAdminOnly; empty: unknown
  bool is_root = false;
  LibraryProbe nvml;  // version = CUDA version the driver supports (NVML)
  std::vector<GpuFacts> gpus;
};

struct ProbeOptions {
  std::string driver_library = "libcuda.so.1";
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string driver_params = "/proc/driver/nvidia/params";
};

SystemFacts probe_system(const ProbeOptions& options = {});

enum class CheckStatus { Ok, Warning, Problem };

struct DoctorCheck {
  std::string name;  // "NVIDIA driver"
  CheckStatus status = CheckStatus::Ok;
  std::string detail;  // what was found
  std::string fix;     // what to do, for a warning or a problem
};

struct DoctorReport {
  std::vector<DoctorCheck> checks;
  std::vector<GpuFacts> gpus;
  // 0: everything fathom measures is available; 1: something is missing (checks say what).
  int exit_status() const noexcept;
};

DoctorReport diagnose(const SystemFacts& facts);

// "13.0" from 13000; "9.10.0" from cuDNN's 91000.
std::string cuda_version_text(std::int64_t v);
std::string cudnn_version_text(std::int64_t v);

std::string format_doctor(const DoctorReport& r);
std::string format_doctor_json(const DoctorReport& r);

}  // namespace fathom
