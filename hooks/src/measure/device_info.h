#pragma once
// Which device a session measures, and what it cannot measure on this machine.
#include <c10/core/Device.h>
#include <fathom/report.h>

#include <optional>
#include <string>
#include <vector>

namespace fathom::detail {

struct DeviceInfo {
  std::optional<c10::Device> device;  // the CUDA device to measure; nullopt on a CPU-only run
  std::string label;                  // "cuda:0" or "cpu"
  std::string name;
  std::optional<std::int64_t> memory_bytes;
  std::string pci_bus_id;  // "00000000:3B:00.0", NVML's form; empty on CPU
  std::vector<Unmeasured> not_measured;
};

DeviceInfo probe_device();

}  // namespace fathom::detail
