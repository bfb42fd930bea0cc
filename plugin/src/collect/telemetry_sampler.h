#pragma once
// Samples a device's telemetry on a background thread. The readings come from a TelemetrySource:
// NVML, loaded at run time (open_nvml_telemetry), or a stand-in in tests.
//
// Wiring in a session (what libtorch/ does):
//   auto nvml = fathom::open_nvml_telemetry({.pci_bus_id = bus_id_of_the_cuda_device});
//   env.not_measured += nvml.not_measured;                 // NVML absent: the report says so
//   if (nvml.source) sampler.emplace(std::move(nvml.source), std::chrono::milliseconds(100));
//   ... at each epoch end:  summary.telemetry = sampler->take();
#include <fathom/device_telemetry.h>
#include <fathom/unmeasured.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace fathom {

// One device's readings. read() and the other calls never throw: a field that cannot be read
// stays empty and is listed by unsupported().
class TelemetrySource {
 public:
  virtual ~TelemetrySource() = default;
  virtual DeviceLimits limits() const = 0;
  virtual TelemetrySample read(std::int64_t now_ns) noexcept = 0;
  virtual std::vector<Unmeasured> unsupported() const = 0;
};

struct NvmlDeviceSelector {
  // "00000000:3B:00.0" (NVML's form, from cudaDeviceProp pciDomainID:pciBusID:pciDeviceID.0).
  // Preferred: CUDA and NVML number devices differently under CUDA_VISIBLE_DEVICES.
  std::string pci_bus_id;
  int index = 0;  // NVML's index, used when pci_bus_id is empty
  std::string library = "libnvidia-ml.so.1";
};

struct NvmlOpenResult {
  std::unique_ptr<TelemetrySource> source;  // null when NVML or the device is unavailable
  std::vector<Unmeasured> not_measured;     // why, when source is null
};

// Loads NVML with dlopen and opens the device. Never throws.
NvmlOpenResult open_nvml_telemetry(const NvmlDeviceSelector& device = {});

// Reads a source every period on its own thread until destroyed. Memory is bounded (see
// TelemetryAccumulator). Not copyable or movable: the thread holds `this`.
class TelemetrySampler {
 public:
  TelemetrySampler(std::unique_ptr<TelemetrySource> source, std::chrono::milliseconds period);
  ~TelemetrySampler();
  TelemetrySampler(const TelemetrySampler&) = delete;
  TelemetrySampler& operator=(const TelemetrySampler&) = delete;

  // The telemetry since the previous take() (or the start), and a fresh interval after it.
  // A sample is taken first, so even a short interval has one.
  DeviceTelemetry take();
  std::int64_t samples_taken() const;

 private:
  void run();
  void sample();

  std::unique_ptr<TelemetrySource> source_;
  std::chrono::milliseconds period_;
  DeviceLimits limits_;
  // Guards source_ and acc_: a reading and its accumulation happen together, in time order.
  mutable std::mutex sample_mutex_;
  TelemetryAccumulator acc_;
  std::int64_t total_ = 0;
  std::mutex stop_mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace fathom
