// The names fathom's writers and readers give the records' enums (one table each).
#include <fathom/comm_stats.h>
#include <fathom/gpu_records.h>
#include <fathom/hardware_fit.h>
#include <fathom/records.h>
#include <fathom/report.h>

namespace fathom {

std::string_view report_origin_name(ReportOrigin o) noexcept {
  return o == ReportOrigin::NsightExport ? "nsight export" : "session";
}

std::optional<ReportOrigin> report_origin_from_name(std::string_view name) noexcept {
  if (name == "session") return ReportOrigin::Session;
  if (name == "nsight export") return ReportOrigin::NsightExport;
  return std::nullopt;
}

std::string_view Environment::mode_text() const noexcept {
  return mode ? mode_name(*mode) : report_origin_name(origin);
}

std::string_view fit_name(Fit f) noexcept {
  switch (f) {
    case Fit::Fits:
      return "fits";
    case Fit::Tight:
      return "tight";
    case Fit::DoesNotFit:
      return "does_not_fit";
  }
  return "?";
}

std::string_view comm_source_name(CommSource s) noexcept {
  switch (s) {
    case CommSource::Host:
      return "host";
    case CommSource::Gpu:
      return "gpu";
    case CommSource::None:
      break;
  }
  return "none";
}

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
