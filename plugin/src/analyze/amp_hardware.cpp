#include "analyze/amp_hardware.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace fathom {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

struct IsaCap {
  std::string_view name;
  bool avx512_bf16;  // the cap still lets oneDNN use AVX-512 BF16 instructions
  bool amx_bf16;     // ... and AMX tiles
};

// oneDNN's dnnl_cpu_isa_t names (dnnl_types.h), in the order of the ISAs they allow.
constexpr std::array<IsaCap, 14> kIsaCaps{{
    {"SSE41", false, false},
    {"AVX", false, false},
    {"AVX2", false, false},
    {"AVX2_VNNI", false, false},
    {"AVX2_VNNI_2", false, false},
    {"AVX512_CORE", false, false},
    {"AVX512_CORE_VNNI", false, false},
    {"AVX512_CORE_BF16", true, false},
    {"AVX512_CORE_FP16", true, false},
    {"AVX10_1_512", true, false},
    {"AVX512_CORE_AMX", true, true},
    {"AVX10_1_512_AMX", true, true},
    {"AVX512_CORE_AMX_FP16", true, true},
    {"AVX10_1_512_AMX_FP16", true, true},
}};

}  // namespace

std::vector<std::string> usable_cpu_bf16_units(const std::vector<std::string>& units,
                                               std::string_view onednn_max_cpu_isa,
                                               std::string_view aten_cpu_capability,
                                               std::string* limited_by) {
  const std::string isa = upper(onednn_max_cpu_isa);
  const auto cap = std::find_if(kIsaCaps.begin(), kIsaCaps.end(),
                                [&](const IsaCap& c) { return c.name == isa; });
  const std::string aten = upper(aten_cpu_capability);
  const bool aten_capped = aten == "DEFAULT" || aten == "AVX2";
  std::vector<std::string> out;
  std::string why;
  for (const std::string& u : units) {
    const bool onednn_ok =
        cap == kIsaCaps.end() || (u == "amx_bf16" ? cap->amx_bf16 : cap->avx512_bf16);
    if (onednn_ok && !aten_capped) {
      out.push_back(u);
      continue;
    }
    if (!why.empty()) continue;
    why = !onednn_ok ? fmt::format("ONEDNN_MAX_CPU_ISA={}", onednn_max_cpu_isa)
                     : fmt::format("ATen's CPU capability {} (ATEN_CPU_CAPABILITY)", aten);
  }
  if (limited_by) *limited_by = why;
  return out;
}

std::optional<std::string> amp_not_native(const AmpDeviceFacts& device, bool cuda) {
  if (cuda) {
    // Tensor Cores from Volta (7.0): fp16 there, bf16 from Ampere (8.0), which autocast picks.
    if (device.compute_major == 0 || device.compute_major >= 7) return std::nullopt;
    return fmt::format(
        "this GPU ({}, compute capability {}.{}) has no Tensor Cores: 16-bit autocast would run "
        "on the same units as fp32, so Auto mode does not try it",
        device.device_name.empty() ? "unnamed" : device.device_name, device.compute_major,
        device.compute_minor);
  }
  if (!device.cpu_bf16_units.empty()) return std::nullopt;
  if (!device.cpu_bf16_limit.empty())
    return fmt::format(
        "the CPU's bf16 units are out of reach of this process's kernels ({}): bf16 would run "
        "emulated, slower than fp32, and some ops (oneDNN's LSTM) have no bf16 kernel there, so "
        "Auto mode does not try it",
        device.cpu_bf16_limit);
  return "this CPU lists no bf16 units (amx_bf16, avx512_bf16) in /proc/cpuinfo: bf16 would run "
         "emulated, slower than fp32, and some ops (oneDNN's LSTM) have no bf16 kernel there, so "
         "Auto mode does not try it";
}

}  // namespace fathom
