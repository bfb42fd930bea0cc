#include "collect/doctor.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/bytes_text.h"

namespace fathom {
namespace {

constexpr const char* kDriverFix =
    "install the NVIDIA driver (Debian: `apt install nvidia-driver`; data-center GPUs: NVIDIA's "
    "datacenter driver), then check with `nvidia-smi`; in a container, start it with the NVIDIA "
    "Container Toolkit (`docker run --gpus all ...`)";

using detail::bytes_text;
std::string yes(bool b) { return b ? "yes" : "no"; }

std::string link_text(const std::optional<int>& gen, const std::optional<int>& width) {
  if (!gen && !width) return "unknown";
  return fmt::format("gen {} x{}", gen ? std::to_string(*gen) : "?",
                     width ? std::to_string(*width) : "?");
}

void add(DoctorReport& r, std::string name, CheckStatus s, std::string detail,
         std::string fix = {}) {
  r.checks.push_back({std::move(name), s, std::move(detail), std::move(fix)});
}

void driver_check(const SystemFacts& f, DoctorReport& r) {
  if (!f.driver.loaded) {
    add(r, "NVIDIA driver", CheckStatus::Problem,
        fmt::format("{} could not be loaded ({}): no GPU can be used", f.driver.library,
                    f.driver.error),
        kDriverFix);
    return;
  }
  std::string detail = f.driver.library;
  if (!f.driver_version.empty()) detail += ", driver " + f.driver_version;
  if (f.driver.version) detail += ", supports CUDA " + cuda_version_text(*f.driver.version);
  if (!f.driver_device_error.empty()) {
    add(r, "NVIDIA driver", CheckStatus::Problem, detail + "; " + f.driver_device_error,
        "check `nvidia-smi` and `dmesg | grep -i nvidia`; load the kernel module (`sudo modprobe "
        "nvidia`) or reinstall the driver matching the running kernel");
    return;
  }
  if (f.driver_device_count && *f.driver_device_count == 0) {
    add(r, "NVIDIA driver", CheckStatus::Problem, detail + "; it sees no GPU",
        "check CUDA_VISIBLE_DEVICES (empty or wrong ids hide every GPU) and `nvidia-smi -L`");
    return;
  }
  if (f.driver_device_count) detail += fmt::format(", {} GPU(s)", *f.driver_device_count);
  add(r, "NVIDIA driver", CheckStatus::Ok, detail);
}

void runtime_check(const SystemFacts& f, DoctorReport& r) {
  if (!f.runtime.loaded) {
    add(r, "CUDA runtime", CheckStatus::Warning,
        fmt::format("none of {} on the loader path ({})", f.runtime.library, f.runtime.error),
        "LibTorch carries its own runtime, so training works; for other tools add the toolkit's "
        "lib folder: `export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH`");
    return;
  }
  std::string detail = f.runtime.library;
  if (f.runtime.version) detail += ", CUDA " + cuda_version_text(*f.runtime.version);
  if (f.driver.version && f.runtime.version && *f.driver.version < *f.runtime.version) {
    add(r, "CUDA runtime", CheckStatus::Problem,
        fmt::format("{}; the driver supports only CUDA {}", detail,
                    cuda_version_text(*f.driver.version)),
        fmt::format("update the NVIDIA driver to one that supports CUDA {} (see the CUDA release "
                    "notes' driver table), or use a LibTorch built for CUDA {}",
                    cuda_version_text(*f.runtime.version), cuda_version_text(*f.driver.version)));
    return;
  }
  if (f.runtime_device_count) detail += fmt::format(", sees {} GPU(s)", *f.runtime_device_count);
  // A runtime that loads but cannot reach a GPU through the driver is not "ok" (issue 24: it
  // said so beside the driver's error); the driver's line holds the cause and its fix.
  if (!f.runtime_device_error.empty() || !f.driver.loaded || !f.driver_device_error.empty()) {
    add(r, "CUDA runtime", CheckStatus::Warning,
        detail + "; it reaches no GPU: " +
            (!f.runtime_device_error.empty() ? f.runtime_device_error
             : !f.driver.loaded              ? std::string("there is no NVIDIA driver")
                                             : f.driver_device_error),
        "fix the NVIDIA driver first (above)");
    return;
  }
  add(r, "CUDA runtime", CheckStatus::Ok, detail);
}

void cudnn_check(const SystemFacts& f, DoctorReport& r) {
  if (!f.cudnn.loaded) {
    add(r, "cuDNN", CheckStatus::Warning,
        fmt::format("none of {} on the loader path ({})", f.cudnn.library, f.cudnn.error),
        "convolutions need cuDNN: `apt install libcudnn9-cuda-13` (NVIDIA's repository), or use "
        "the copy a pip torch carries (site-packages/nvidia/cudnn/lib) on LD_LIBRARY_PATH");
    return;
  }
  add(r, "cuDNN", CheckStatus::Ok,
      f.cudnn.library +
          (f.cudnn.version ? ", version " + cudnn_version_text(*f.cudnn.version) : ""));
}

void cupti_checks(const SystemFacts& f, DoctorReport& r) {
  if (!f.cupti.loaded) {
    add(r, "CUPTI", CheckStatus::Problem,
        fmt::format("{} could not be loaded ({}): GPU kernels, copies and Tensor Core use will "
                    "not be measured",
                    f.cupti.library, f.cupti.error),
        "install the CUDA toolkit's CUPTI (`apt install cuda-cupti-13-0`) or add its folder: "
        "`export LD_LIBRARY_PATH=/usr/local/cuda/extras/CUPTI/lib64:$LD_LIBRARY_PATH`");
  } else {
    add(r, "CUPTI", CheckStatus::Ok,
        f.cupti.library +
            (f.cupti.version ? fmt::format(", API version {}", *f.cupti.version) : ""));
  }
  const std::string name = "CUPTI permission";
  if (!f.driver.loaded) {
    add(r, name, CheckStatus::Warning,
        "unknown: there is no NVIDIA driver to ask (kernel tracing needs the driver)",
        "fix the NVIDIA driver first (above)");
  } else if (f.profiling_admin_only.value_or(false) && !f.is_root) {
    add(r, name, CheckStatus::Warning,
        "kernel and copy tracing permitted; hardware counters restricted to administrators "
        "(RmProfilingAdminOnly=1): the Tensor Core share comes from kernel names only",
        "run as root, or allow counters for all users: `echo 'options nvidia "
        "NVreg_RestrictProfilingToAdminUsers=0' | sudo tee /etc/modprobe.d/nvidia-profiling.conf` "
        "and reboot");
  } else {
    add(r, name, CheckStatus::Ok,
        f.profiling_admin_only
            ? "kernel and copy tracing and hardware counters permitted"
            : "kernel and copy tracing permitted (counter restriction not readable here)");
  }
}

void nvml_check(const SystemFacts& f, DoctorReport& r) {
  if (!f.nvml.loaded) {
    add(r, "NVML", CheckStatus::Problem,
        f.nvml.error +
            ": utilization, power, energy, clocks and the PCIe link will not be measured",
        "NVML ships with the NVIDIA driver (libnvidia-ml.so.1): " + std::string(kDriverFix));
    return;
  }
  std::string detail = f.nvml.library;
  if (!f.driver_version.empty()) detail += ", driver " + f.driver_version;
  detail += fmt::format(", {} GPU(s)", f.gpus.size());
  if (!f.nvml.error.empty()) {
    add(r, "NVML", CheckStatus::Problem, detail + "; " + f.nvml.error,
        "check `nvidia-smi`; NVML and the kernel module must come from the same driver");
    return;
  }
  add(r, "NVML", CheckStatus::Ok, detail);
}

void gpu_checks(const SystemFacts& f, DoctorReport& r) {
  r.gpus = f.gpus;
  if (f.gpus.empty()) {
    const bool some =
        f.driver_device_count.value_or(0) > 0 || f.runtime_device_count.value_or(0) > 0;
    if (some) {
      add(r, "GPUs", CheckStatus::Warning,
          "CUDA sees GPUs but NVML could not describe them (compute capability, memory, PCIe link)",
          "see the NVML line above");
    } else {
      add(r, "GPUs", CheckStatus::Problem,
          "no GPU found: fathom measures host phases, throughput and process memory only",
          "run on a machine with an NVIDIA GPU and driver (see above)");
    }
    return;
  }
  for (const GpuFacts& g : f.gpus) {
    const int cc = g.compute_major * 10 + g.compute_minor;
    std::string detail = fmt::format(
        "{}, compute capability {}.{}, {}, bf16 {}, TF32 {}, FP8 {}, PCIe {} (supports {})", g.name,
        g.compute_major, g.compute_minor,
        g.memory_bytes ? bytes_text(*g.memory_bytes) : "memory unknown", yes(cc >= 80),
        yes(cc >= 80), yes(cc >= 89), link_text(g.pcie_gen, g.pcie_width),
        link_text(g.pcie_max_gen, g.pcie_max_width));
    if (g.nvlinks_active) detail += fmt::format(", NVLink {} link(s) up", *g.nvlinks_active);
    const std::string name = fmt::format("GPU {}", g.index);
    if (g.compute_major > 0 && g.compute_major < 7) {
      add(r, name, CheckStatus::Warning, detail + "; no Tensor Cores",
          "mixed precision saves memory here but will not make matrix math faster");
    } else if (g.pcie_width && g.pcie_max_width && *g.pcie_width < *g.pcie_max_width) {
      add(r, name, CheckStatus::Warning,
          detail + "; the link has fewer lanes than the card supports",
          "move the card to a CPU-attached x16 slot; check risers and the BIOS PCIe settings");
    } else {
      std::string note;
      if (g.pcie_gen && g.pcie_max_gen && *g.pcie_gen < *g.pcie_max_gen)
        note = " (an idle GPU lowers its link generation; fathom checks it under load)";
      add(r, name, CheckStatus::Ok, detail + note);
    }
  }
}

std::string_view status_tag(CheckStatus s) {
  switch (s) {
    case CheckStatus::Ok:
      return "[ ok ]";
    case CheckStatus::Warning:
      return "[warn]";
    case CheckStatus::Problem:
      return "[FAIL]";
  }
  return "[ ?? ]";
}

std::string_view status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::Ok:
      return "ok";
    case CheckStatus::Warning:
      return "warning";
    case CheckStatus::Problem:
      return "problem";
  }
  return "?";
}

}  // namespace

std::string cuda_version_text(std::int64_t v) {
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::string cudnn_version_text(std::int64_t v) {
  // cuDNN 9 encodes major*10000 + minor*100 + patch; cuDNN 8 major*1000 + minor*100 + patch.
  if (v >= 90000) return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
  return fmt::format("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);
}

int DoctorReport::exit_status() const noexcept {
  for (const DoctorCheck& c : checks)
    if (c.status == CheckStatus::Problem) return 1;
  return 0;
}

DoctorReport diagnose(const SystemFacts& f) {
  DoctorReport r;
  driver_check(f, r);
  runtime_check(f, r);
  cudnn_check(f, r);
  cupti_checks(f, r);
  nvml_check(f, r);
  gpu_checks(f, r);
  return r;
}

std::string format_doctor(const DoctorReport& r) {
  std::string out = "fathom doctor\n";
  auto it = std::back_inserter(out);
  std::size_t width = 0;
  for (const DoctorCheck& c : r.checks) width = std::max(width, c.name.size());
  int problems = 0, warnings = 0;
  for (const DoctorCheck& c : r.checks) {
    fmt::format_to(it, "  {} {:<{}}  {}\n", status_tag(c.status), c.name, width, c.detail);
    if (c.status != CheckStatus::Ok && !c.fix.empty())
      fmt::format_to(it, "         {:<{}}  fix: {}\n", "", width, c.fix);
    problems += c.status == CheckStatus::Problem;
    warnings += c.status == CheckStatus::Warning;
  }
  if (problems == 0 && warnings == 0) {
    out += "\nready: fathom can measure everything it knows how to on this machine\n";
  } else {
    fmt::format_to(it, "\n{} problem(s), {} warning(s){}\n", problems, warnings,
                   problems ? ": what is marked FAIL will be reported as not measured" : "");
  }
  return out;
}

std::string format_doctor_json(const DoctorReport& r) {
  nlohmann::json checks = nlohmann::json::array();
  for (const DoctorCheck& c : r.checks)
    checks.push_back({{"name", c.name},
                      {"status", status_name(c.status)},
                      {"detail", c.detail},
                      {"fix", c.fix}});
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuFacts& g : r.gpus) {
    const int cc = g.compute_major * 10 + g.compute_minor;
    auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"compute_capability", fmt::format("{}.{}", g.compute_major, g.compute_minor)},
                    {"memory_bytes", opt(g.memory_bytes)},
                    {"bf16", cc >= 80},
                    {"tf32", cc >= 80},
                    {"fp8", cc >= 89},
                    {"pcie_gen", opt(g.pcie_gen)},
                    {"pcie_width", opt(g.pcie_width)},
                    {"pcie_max_gen", opt(g.pcie_max_gen)},
                    {"pcie_max_width", opt(g.pcie_max_width)},
                    {"nvlinks_active", opt(g.nvlinks_active)}});
  }
  nlohmann::json j = {{"exit_status", r.exit_status()}, {"checks", checks}, {"gpus", gpus}};
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace fathom
