// The names fathom's writers and readers give the records' enums (one table each).
#include <fathom/gpu_records.h>
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

std::string_view memcpy_kind_name(MemcpyKind k) noexcept {
  switch (k) {
    case MemcpyKind::HostToDevice:
      return "HtoD";
    case MemcpyKind::DeviceToHost:
      return "DtoH";
    case MemcpyKind::DeviceToDevice:
      return "DtoD";
    case MemcpyKind::HostToHost:
      return "HtoH";
    case MemcpyKind::PeerToPeer:
      return "PtoP";
    case MemcpyKind::Unknown:
      break;
  }
  return "unknown";
}

std::string_view memory_kind_name(MemoryKind k) noexcept {
  switch (k) {
    case MemoryKind::Pageable:
      return "pageable";
    case MemoryKind::Pinned:
      return "pinned";
    case MemoryKind::Device:
      return "device";
    case MemoryKind::Managed:
      return "managed";
    case MemoryKind::Unknown:
      break;
  }
  return "unknown";
}

}  // namespace fathom
