#include <fathom/records.h>
#include <fathom/report.h>

namespace fathom {

std::string_view copy_direction_name(CopyDirection d) noexcept {
  switch (d) {
    case CopyDirection::HostToDevice:
      return "host_to_device";
    case CopyDirection::DeviceToHost:
      return "device_to_host";
    case CopyDirection::DeviceToDevice:
      return "device_to_device";
    case CopyDirection::HostToHost:
      return "host_to_host";
  }
  return "?";
}

std::string_view severity_name(Severity s) noexcept {
  switch (s) {
    case Severity::Info:
      return "info";
    case Severity::Warning:
      return "warning";
    case Severity::Critical:
      return "critical";
  }
  return "?";
}

}  // namespace fathom
