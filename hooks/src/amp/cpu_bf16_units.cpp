// The CPU's bf16 units this process's kernels may use: the host's, less what oneDNN's and ATen's
// caps take away (amp_hardware.h decides; this reads the caps where torch keeps them).
#include <ATen/Version.h>

#include <cstdlib>

#include "amp/amp_extension.h"
#include "analyze/amp_hardware.h"
#include "collect/host_info.h"

namespace fathom::detail {

std::vector<std::string> cpu_bf16_units_here(std::string* limited_by) {
  // oneDNN reads its cap from the environment once, at its first primitive: read it the same way.
  const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (!isa || !*isa) isa = std::getenv("DNNL_MAX_CPU_ISA");
  std::string aten;
  try {
    aten = at::get_cpu_capability();  // ATen's reading of ATEN_CPU_CAPABILITY against the CPU
  } catch (const std::exception&) {
    // Unknown: no cap from ATen; oneDNN's still applies.
  }
  return usable_cpu_bf16_units(cpu_bf16_units(), isa ? isa : "", aten, limited_by);
}

}  // namespace fathom::detail
