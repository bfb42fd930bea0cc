#pragma once
// Facts about the host for the report's environment section.
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

std::string host_name();
std::string cpu_model();              // "AMD EPYC 7B13", or "unknown CPU"
std::string utc_timestamp_iso8601();  // "2026-11-30T01:02:03Z"
std::string default_run_name();       // "fathom-20261130-010203-4242"

// The CPU's bf16 matrix and vector units named in cpuinfo's flags ("amx_bf16", "avx512_bf16"),
// in that order; empty when it has none (bf16 then runs emulated, usually slower than fp32).
std::vector<std::string> cpu_bf16_units(std::string_view cpuinfo);
std::vector<std::string> cpu_bf16_units();  // from /proc/cpuinfo

}  // namespace fathom
