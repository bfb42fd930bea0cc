// fathom doctor: what this machine gives fathom to measure with, each problem with its fix.
// Exit status 0: ready; 1: something is missing (scripts can gate a GPU job on it).
#include <iostream>
#include <memory>

#include "collect/doctor.h"
#include "commands.h"

namespace fathom::cli {
namespace {

struct DoctorArgs {
  bool json = false;
  ProbeOptions probe;
};

int run_doctor(const DoctorArgs& a) {
  const DoctorReport r = diagnose(probe_system(a.probe));
  std::cout << (a.json ? format_doctor_json(r) : format_doctor(r));
  return r.exit_status();
}

}  // namespace

Run add_doctor_command(CLI::App& app) {
  auto args = std::make_shared<DoctorArgs>();
  auto* cmd = app.add_subcommand("doctor",
                                 "Check the NVIDIA driver, CUDA runtime, cuDNN, CUPTI, NVML and "
                                 "GPUs (exit 1 if something is missing)");
  cmd->add_flag("--json", args->json, "print the checks as JSON");
  cmd->add_option("--nvml", args->probe.nvml_library, "the NVML library to load")
      ->capture_default_str();
  cmd->add_option("--driver", args->probe.driver_library, "the CUDA driver library to load")
      ->capture_default_str();
  return [args] { return run_doctor(*args); };
}

}  // namespace fathom::cli
