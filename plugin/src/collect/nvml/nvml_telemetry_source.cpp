// TelemetrySource over NVML. A reading that fails is not retried: NVML answers "not supported"
// the same way every time, and some calls (PCIe throughput) take 20 ms each.
#include <array>
#include <memory>
#include <string>

#include "base/warning_sink.h"
#include "collect/nvml/nvml_api.h"
#include "collect/telemetry_sampler.h"

namespace fathom {
namespace {

// The readings, in the order of `enabled_`.
enum Field : std::size_t {
  kUtilization,
  kMemory,
  kPower,
  kEnergy,
  kSmClock,
  kMemClock,
  kThrottle,
  kPcieGen,
  kPcieWidth,
  kPcieTx,
  kPcieRx,
  kFieldCount
};
constexpr std::array<const char*, kFieldCount> kFieldNames{"GPU utilization (NVML)",
                                                           "device memory used (NVML)",
                                                           "power draw (NVML)",
                                                           "energy (NVML energy counter)",
                                                           "SM clock (NVML)",
                                                           "memory clock (NVML)",
                                                           "clock throttle reasons (NVML)",
                                                           "PCIe link generation (NVML)",
                                                           "PCIe link width (NVML)",
                                                           "PCIe transmit throughput (NVML)",
                                                           "PCIe receive throughput (NVML)"};

class NvmlTelemetrySource final : public TelemetrySource {
 public:
  NvmlTelemetrySource(std::shared_ptr<nvml::Library> lib, nvml::Device device)
      : lib_(std::move(lib)), api_(lib_->api()), device_(device) {
    enabled_.fill(true);
    limits_ = read_limits();
  }

  DeviceLimits limits() const override { return limits_; }

  std::vector<Unmeasured> unsupported() const override { return unsupported_; }

  TelemetrySample read(std::int64_t now_ns) noexcept override {
    TelemetrySample s;
    s.time_ns = now_ns;
    try {
      nvml::Utilization u{};
      if (call(kUtilization, api_.device_utilization, "nvmlDeviceGetUtilizationRates", device_,
               &u)) {
        s.gpu_utilization_pct = u.gpu;
        s.memory_utilization_pct = u.memory;
      }
      nvml::Memory m{};
      if (call(kMemory, api_.device_memory, "nvmlDeviceGetMemoryInfo", device_, &m)) {
        s.memory_used_bytes = static_cast<std::int64_t>(m.used);
        s.memory_total_bytes = static_cast<std::int64_t>(m.total);
      }
      unsigned int mw = 0;
      if (call(kPower, api_.device_power_usage, "nvmlDeviceGetPowerUsage", device_, &mw))
        s.power_w = mw / 1000.0;
      unsigned long long mj = 0;
      if (call(kEnergy, api_.device_total_energy, "nvmlDeviceGetTotalEnergyConsumption", device_,
               &mj))
        s.energy_j = mj / 1000.0;
      unsigned int mhz = 0;
      if (call(kSmClock, api_.device_clock, "nvmlDeviceGetClockInfo(SM)", device_,
               static_cast<int>(nvml::kClockSm), &mhz))
        s.sm_clock_mhz = mhz;
      if (call(kMemClock, api_.device_clock, "nvmlDeviceGetClockInfo(MEM)", device_,
               static_cast<int>(nvml::kClockMem), &mhz))
        s.memory_clock_mhz = mhz;
      unsigned long long reasons = 0;
      if (call(kThrottle, api_.device_clock_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons",
               device_, &reasons))
        s.throttle_reasons = reasons;
      unsigned int v = 0;
      if (call(kPcieGen, api_.device_pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration", device_, &v))
        s.pcie_gen = static_cast<int>(v);
      if (call(kPcieWidth, api_.device_pcie_width, "nvmlDeviceGetCurrPcieLinkWidth", device_, &v))
        s.pcie_width = static_cast<int>(v);
      // KB/s as NVML counts them (1 KB = 1024 bytes).
      if (call(kPcieTx, api_.device_pcie_throughput, "nvmlDeviceGetPcieThroughput(TX)", device_,
               static_cast<int>(nvml::kPcieTxBytes), &v))
        s.pcie_tx_bytes_per_s = v * 1024.0;
      if (call(kPcieRx, api_.device_pcie_throughput, "nvmlDeviceGetPcieThroughput(RX)", device_,
               static_cast<int>(nvml::kPcieRxBytes), &v))
        s.pcie_rx_bytes_per_s = v * 1024.0;
    } catch (...) {
      // Only a failed allocation in unsupported_ can get here; the sample keeps what it has.
      detail::swallowed("collect/nvml/nvml_telemetry_source.cpp");
    }
    return s;
  }

 private:
  template <typename Fn, typename... Args>
  bool call(Field f, Fn fn, const char* name, Args... args) {
    if (!enabled_[f]) return false;
    const nvml::Return r = fn ? fn(args...) : nvml::kErrorFunctionNotFound;
    if (r == nvml::kSuccess) return true;
    enabled_[f] = false;
    unsupported_.push_back(
        {kFieldNames[f], fn ? std::string(name) + ": " + api_.error(r)
                            : std::string(name) + " is missing from this driver's NVML"});
    return false;
  }

  DeviceLimits read_limits() {
    DeviceLimits l;
    char name[nvml::kDeviceNameBufferSize] = {};
    if (api_.device_name && api_.device_name(device_, name, sizeof name) == nvml::kSuccess)
      l.name = name;
    unsigned int v = 0;
    if (api_.device_pcie_max_gen && api_.device_pcie_max_gen(device_, &v) == nvml::kSuccess)
      l.pcie_max_gen = static_cast<int>(v);
    if (api_.device_pcie_max_width && api_.device_pcie_max_width(device_, &v) == nvml::kSuccess)
      l.pcie_max_width = static_cast<int>(v);
    if (api_.device_max_clock &&
        api_.device_max_clock(device_, nvml::kClockSm, &v) == nvml::kSuccess)
      l.sm_clock_max_mhz = v;
    if (api_.device_power_limit && api_.device_power_limit(device_, &v) == nvml::kSuccess)
      l.power_limit_w = v / 1000.0;
    if (api_.device_nvlink_state) {
      int active = 0;
      bool any = false;
      for (unsigned int link = 0; link < nvml::kNvLinkMaxLinks; ++link) {
        int state = 0;
        if (api_.device_nvlink_state(device_, link, &state) != nvml::kSuccess) continue;
        any = true;
        active += state != 0;
      }
      // A device without NVLink answers "not supported" for every link: that is 0 links.
      l.nvlinks_active = any ? active : 0;
    }
    return l;
  }

  std::shared_ptr<nvml::Library> lib_;
  const nvml::Api& api_;
  nvml::Device device_;
  DeviceLimits limits_;
  std::array<bool, kFieldCount> enabled_{};
  std::vector<Unmeasured> unsupported_;
};

constexpr const char* kWhat = "device telemetry: utilization, power, clocks, PCIe link (NVML)";

Unmeasured telemetry_unmeasured(std::string why) {
  return {kWhat, std::move(why), UnmeasuredId::DeviceTelemetry};
}

}  // namespace

NvmlOpenResult open_nvml_telemetry(const NvmlDeviceSelector& sel) {
  NvmlOpenResult out;
  try {
    auto lib = std::make_shared<nvml::Library>(sel.library);
    if (!lib->ok()) {
      out.not_measured.push_back(telemetry_unmeasured(lib->why()));
      return out;
    }
    const nvml::Api& api = lib->api();
    unsigned int count = 0;
    nvml::Return r = api.device_count(&count);
    if (r != nvml::kSuccess || count == 0) {
      out.not_measured.push_back(telemetry_unmeasured(
          r != nvml::kSuccess ? "nvmlDeviceGetCount: " + api.error(r) : "NVML sees no GPU"));
      return out;
    }
    nvml::Device device = nullptr;
    if (!sel.pci_bus_id.empty() && api.device_by_pci_bus_id) {
      r = api.device_by_pci_bus_id(sel.pci_bus_id.c_str(), &device);
      if (r != nvml::kSuccess) {
        out.not_measured.push_back(telemetry_unmeasured("no NVML device at PCI bus id " +
                                                        sel.pci_bus_id + ": " + api.error(r)));
        return out;
      }
    } else {
      r = sel.index >= 0 ? api.device_by_index(static_cast<unsigned int>(sel.index), &device)
                         : nvml::kErrorNotSupported;
      if (r != nvml::kSuccess) {
        out.not_measured.push_back(
            telemetry_unmeasured("no NVML device with index " + std::to_string(sel.index) + " (" +
                                 std::to_string(count) + " present): " + api.error(r)));
        return out;
      }
    }
    out.source = std::make_unique<NvmlTelemetrySource>(std::move(lib), device);
  } catch (const std::exception& e) {
    out.source.reset();
    out.not_measured.push_back(telemetry_unmeasured(std::string("NVML setup failed: ") + e.what()));
  }
  return out;
}

}  // namespace fathom
