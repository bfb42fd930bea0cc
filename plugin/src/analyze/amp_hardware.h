#pragma once
// Where Auto mode may try 16-bit autocast: only where the device runs it on units built for it
// (issue 24). Elsewhere bf16 is emulated, slower than fp32, and some ops have no 16-bit kernel at
// all (oneDNN's LSTM without AVX-512 BF16: "could not create a primitive descriptor"), so a trial
// could only cost the loop steps. Torch-free: the AMP extension passes what it read.
#include <fathom/mixed_precision.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

// The bf16 units of `units` (cpu_bf16_units(): "amx_bf16", "avx512_bf16") that this process's
// kernels may use. oneDNN, which runs the GEMMs, convolutions and RNNs, is capped by
// ONEDNN_MAX_CPU_ISA (its older name DNNL_MAX_CPU_ISA; values as oneDNN spells them, any case:
// "AVX2", "AVX512_CORE_BF16", "AVX512_CORE_AMX"); ATen's own kernels by ATEN_CPU_CAPABILITY, as
// at::get_cpu_capability() reports it ("DEFAULT", "AVX2", "AVX512"), below AVX512 without bf16
// instructions. An empty or unknown cap takes nothing away (oneDNN ignores a value it does not
// know). `limited_by` gets which cap took units away ("" when none did).
std::vector<std::string> usable_cpu_bf16_units(const std::vector<std::string>& units,
                                               std::string_view onednn_max_cpu_isa,
                                               std::string_view aten_cpu_capability,
                                               std::string* limited_by = nullptr);

// Why 16-bit autocast on this device (cuda: a GPU, else the CPU) would not run natively, to say
// in the report; nullopt when it would. A GPU whose compute capability is unknown (0) is given
// the benefit of the doubt: the trial's timing still decides.
std::optional<std::string> amp_not_native(const AmpDeviceFacts& device, bool cuda);

}  // namespace fathom
