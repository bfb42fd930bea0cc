#include "formats/nsight/nsight_schema.h"

#include <fathom/error.h>
#include <fmt/format.h>

namespace fathom::detail {
namespace {

bool has(std::string_view s, std::string_view part) noexcept {
  return s.find(part) != std::string_view::npos;
}

// What follows the last occurrence of marker: "CUDA_MEMOPR_MEMORY_KIND_PINNED" -> "PINNED".
std::string_view after(std::string_view s, std::string_view marker) noexcept {
  const std::size_t at = s.rfind(marker);
  return at == std::string_view::npos ? s : s.substr(at + marker.size());
}

}  // namespace

EnumTable::EnumTable(const SqliteDb& db, std::string_view table, std::string_view decodes) {
  if (!db.has_table(table))
    throw Error(fmt::format(
        "{} is not an Nsight Systems export fathom can read: table {} is missing, and it decodes "
        "{} (the export numbers its enums its own way, so they cannot be guessed); export the "
        "report again with `nsys export --type sqlite`",
        db.path(), table, decodes));
  SqliteQuery q(db, fmt::format("SELECT id, name FROM {}", table));
  while (q.step()) names_.emplace(q.integer(0), std::string(q.text(1)));
}

const std::string* EnumTable::name(std::int64_t id) const noexcept {
  auto it = names_.find(id);
  return it == names_.end() ? nullptr : &it->second;
}

std::int64_t EnumTable::id(std::string_view name) const noexcept {
  for (const auto& [id, n] : names_)
    if (n == name) return id;
  return -1;
}

MemcpyKind memcpy_kind_from_enum(std::string_view name) noexcept {
  const std::string_view k = after(name, "KIND_");  // "HTOD", "UVM_HTOD", "PTOP", ...
  // Arrays are device memory: a copy to or from one is a host or device copy like any other.
  if (has(k, "HTOD") || has(k, "HTOA")) return MemcpyKind::HostToDevice;
  if (has(k, "DTOH") || has(k, "ATOH")) return MemcpyKind::DeviceToHost;
  if (has(k, "DTOD") || has(k, "ATOD") || has(k, "DTOA") || has(k, "ATOA"))
    return MemcpyKind::DeviceToDevice;
  if (has(k, "HTOH")) return MemcpyKind::HostToHost;
  if (has(k, "PTOP")) return MemcpyKind::PeerToPeer;
  return MemcpyKind::Unknown;
}

MemoryKind memory_kind_from_enum(std::string_view name) noexcept {
  const std::string_view k = after(name, "MEMORY_KIND_");
  if (k == "PAGEABLE") return MemoryKind::Pageable;
  if (k == "PINNED") return MemoryKind::Pinned;
  if (k == "DEVICE" || k == "DEVICE_STATIC" || k == "ARRAY") return MemoryKind::Device;
  if (k == "MANAGED" || k == "MANAGED_STATIC") return MemoryKind::Managed;
  return MemoryKind::Unknown;
}

SyncKind sync_kind_from_enum(std::string_view name) noexcept {
  if (has(name, "STREAM_WAIT_EVENT")) return SyncKind::StreamWaitEvent;
  if (has(name, "EVENT_SYNCHRONIZE")) return SyncKind::Event;
  if (has(name, "STREAM_SYNCHRONIZE")) return SyncKind::Stream;
  if (has(name, "CONTEXT_SYNCHRONIZE")) return SyncKind::Context;
  return SyncKind::Unknown;
}

TableColumns::TableColumns(const SqliteDb& db, std::string_view table)
    : db_(db), table_(table), have_(db.columns(table)) {}

std::string TableColumns::optional(std::string_view column) const {
  return has(column) ? std::string(column) : std::string("NULL");
}

std::string TableColumns::required(std::string_view column) const {
  if (!has(column))
    throw Error(fmt::format(
        "{}: table {} has no column {}, which fathom needs (this Nsight Systems version writes "
        "another schema; tell fathom's maintainers which version wrote it)",
        db_.path(), table_, column));
  return std::string(column);
}

std::string_view runtime_call_name(std::string_view exported) noexcept {
  const std::size_t v = exported.rfind("_v");
  if (v == std::string_view::npos || v + 2 == exported.size()) return exported;
  for (std::size_t i = v + 2; i < exported.size(); ++i)
    if (exported[i] < '0' || exported[i] > '9') return exported;
  return exported.substr(0, v);
}

}  // namespace fathom::detail
