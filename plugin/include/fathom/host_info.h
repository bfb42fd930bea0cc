#pragma once
// Facts about the host for the report's environment section.
#include <string>

namespace fathom {

std::string host_name();
std::string cpu_model();              // "AMD EPYC 7B13", or "unknown CPU"
std::string utc_timestamp_iso8601();  // "2026-11-30T01:02:03Z"
std::string default_run_name();       // "fathom-20261130-010203-4242"

}  // namespace fathom
