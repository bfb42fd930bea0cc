#include "activity_parser.h"

#include <cctype>
#include <cstring>
#include <unordered_set>

namespace fathom::cupti {
namespace {

// CUPTI writes 0 for both timestamps when it could not take them: keep 0 rather than shifting
// it to a time that never happened.
std::int64_t shifted(std::uint64_t t, std::int64_t offset) {
  return t == 0 ? 0 : static_cast<std::int64_t>(t) + offset;
}

std::int32_t stream_of(std::uint32_t id) {
  return id == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? -1 : static_cast<std::int32_t>(id);
}

bool is_driver_launch(const std::string& name) { return name.rfind("cuLaunch", 0) == 0; }

}  // namespace

MemcpyKind memcpy_kind(std::uint8_t k) noexcept {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return MemcpyKind::HostToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return MemcpyKind::DeviceToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return MemcpyKind::DeviceToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return MemcpyKind::HostToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return MemcpyKind::PeerToPeer;
    default:
      return MemcpyKind::Unknown;
  }
}

MemoryKind memory_kind(std::uint8_t k) noexcept {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return MemoryKind::Pageable;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return MemoryKind::Pinned;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return MemoryKind::Device;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return MemoryKind::Managed;
    default:
      return MemoryKind::Unknown;
  }
}

SyncKind sync_kind(CUpti_ActivitySynchronizationType t) noexcept {
  switch (t) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return SyncKind::Event;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return SyncKind::StreamWaitEvent;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return SyncKind::Stream;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return SyncKind::Context;
    default:
      return SyncKind::Unknown;
  }
}

std::string api_display_name(const char* cupti_name) {
  std::string name = cupti_name ? cupti_name : "";
  const std::size_t v = name.rfind("_v");
  if (v != std::string::npos && v + 2 < name.size()) {
    bool digits = true;
    for (std::size_t i = v + 2; i < name.size(); ++i)
      digits = digits && std::isdigit(static_cast<unsigned char>(name[i]));
    if (digits) name.resize(v);
  }
  return name;
}

const std::string& ActivityParser::api_name(CUpti_CallbackDomain domain, std::uint32_t cbid) {
  const std::uint64_t key = (static_cast<std::uint64_t>(domain) << 32) | cbid;
  auto it = names_.find(key);
  if (it != names_.end()) return it->second;
  const char* raw = nullptr;
  std::string name;
  if (api_.get_callback_name && api_.get_callback_name(domain, cbid, &raw) == CUPTI_SUCCESS &&
      raw) {
    name = api_display_name(raw);
  } else {
    name = (domain == CUPTI_CB_DOMAIN_DRIVER_API ? "driver api " : "runtime api ") +
           std::to_string(cbid);
  }
  return names_.emplace(key, std::move(name)).first->second;
}

void ActivityParser::parse(std::uint8_t* buffer, std::size_t valid_size, std::int64_t offset,
                           ParsedBuffer& out) noexcept {
  if (!buffer || valid_size == 0 || !api_.activity_get_next_record) return;
  try {
    std::lock_guard lock(mutex_);
    GpuActivity& a = out.activity;
    // A runtime call and the driver call it makes inside share one correlation id: keep the
    // runtime one so a launch is counted once.
    std::unordered_set<std::uint64_t> runtime_ids;
    std::vector<std::size_t> driver_launches;  // indices into a.runtime_calls
    CUpti_Activity* record = nullptr;
    for (;;) {
      const CUptiResult r = api_.activity_get_next_record(buffer, valid_size, &record);
      if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of the buffer
      if (r != CUPTI_SUCCESS) {
        check(api_, r, "activity_get_next_record", "buffer, valid_size, &record");
        out.error = r;
        break;
      }
      ++out.records;
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
          KernelRecord& o = a.kernels.emplace_back();
          o.name = k->name ? k->name : "";
          o.device = static_cast<std::int32_t>(k->deviceId);
          o.stream = static_cast<std::int32_t>(k->streamId);
          o.start_ns = shifted(k->start, offset);
          o.end_ns = shifted(k->end, offset);
          o.correlation_id = k->correlationId;
          o.grid_x = k->gridX;
          o.grid_y = k->gridY;
          o.grid_z = k->gridZ;
          o.block_x = k->blockX;
          o.block_y = k->blockY;
          o.block_z = k->blockZ;
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
          MemcpyRecord& o = a.memcpys.emplace_back();
          o.kind = memcpy_kind(m->copyKind);
          o.src = memory_kind(m->srcKind);
          o.dst = memory_kind(m->dstKind);
          o.bytes = static_cast<std::int64_t>(m->bytes);
          o.device = static_cast<std::int32_t>(m->deviceId);
          o.stream = static_cast<std::int32_t>(m->streamId);
          o.start_ns = shifted(m->start, offset);
          o.end_ns = shifted(m->end, offset);
          o.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
          // The runtime call (cudaMemcpyAsync) is what fathom's external ids were pushed around;
          // a copy issued straight through the driver has only the driver's id.
          o.correlation_id = m->runtimeCorrelationId ? m->runtimeCorrelationId : m->correlationId;
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY2: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
          MemcpyRecord& o = a.memcpys.emplace_back();
          o.kind = MemcpyKind::PeerToPeer;
          o.src = memory_kind(m->srcKind);
          o.dst = memory_kind(m->dstKind);
          o.bytes = static_cast<std::int64_t>(m->bytes);
          o.device = static_cast<std::int32_t>(m->deviceId);
          o.stream = static_cast<std::int32_t>(m->streamId);
          o.start_ns = shifted(m->start, offset);
          o.end_ns = shifted(m->end, offset);
          o.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
          o.correlation_id = m->correlationId;
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
          MemsetRecord& o = a.memsets.emplace_back();
          o.bytes = static_cast<std::int64_t>(m->bytes);
          o.device = static_cast<std::int32_t>(m->deviceId);
          o.stream = static_cast<std::int32_t>(m->streamId);
          o.start_ns = shifted(m->start, offset);
          o.end_ns = shifted(m->end, offset);
          o.correlation_id = m->correlationId;
          break;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
          const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
          SyncRecord& o = a.syncs.emplace_back();
          o.kind = sync_kind(s->type);
          o.stream = stream_of(s->streamId);
          o.start_ns = shifted(s->start, offset);
          o.end_ns = shifted(s->end, offset);
          o.correlation_id = s->correlationId;
          break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
          const auto* c = reinterpret_cast<const CUpti_ActivityAPI*>(record);
          const bool runtime = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
          const std::string& name =
              api_name(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, c->cbid);
          // Of the driver API only the launches matter (Triton, cuBLASLt launch that way); the
          // rest are the runtime's own calls underneath.
          if (!runtime && !is_driver_launch(name)) break;
          RuntimeCallRecord& o = a.runtime_calls.emplace_back();
          o.name = name;
          o.thread = c->threadId;
          o.start_ns = shifted(c->start, offset);
          o.end_ns = shifted(c->end, offset);
          o.correlation_id = c->correlationId;
          if (runtime) {
            runtime_ids.insert(c->correlationId);
          } else {
            driver_launches.push_back(a.runtime_calls.size() - 1);
          }
          break;
        }
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
          const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
          out.correlations.push_back({e->correlationId, e->externalKind, e->externalId});
          break;
        }
        default:
          ++out.skipped;
          break;
      }
    }
    std::vector<bool> nested(a.runtime_calls.size(), false);
    bool any = false;
    for (std::size_t i : driver_launches) {
      if (runtime_ids.count(a.runtime_calls[i].correlation_id)) nested[i] = any = true;
    }
    if (any) {
      std::size_t keep = 0;
      for (std::size_t i = 0; i < a.runtime_calls.size(); ++i) {
        if (nested[i]) continue;
        if (keep != i) a.runtime_calls[keep] = std::move(a.runtime_calls[i]);
        ++keep;
      }
      a.runtime_calls.resize(keep);
    }
  } catch (...) {
    // Out of memory while growing the batch: what was parsed stays, the rest counts as lost.
    out.error = CUPTI_ERROR_OUT_OF_MEMORY;
  }
}

}  // namespace fathom::cupti
