#include "collect/cupti/activity_parser.h"

#include <cctype>
#include <cstring>
#include <unordered_set>

#include "base/kernel_name.h"
#include "collect/cupti/api_selection.h"

namespace fathom::cupti {
namespace {

std::int64_t raw(std::uint64_t t) { return static_cast<std::int64_t>(t); }

// A new record of a device kind (kernel, copy, memset) with the span every such CUPTI record
// carries (deviceId, streamId, start, end) read once; correlation is the kind's own id.
template <typename Record, typename Cupti>
Record& add_device_record(std::vector<Record>& into, const Cupti* r, std::uint64_t correlation) {
  Record& o = into.emplace_back();
  o.device = static_cast<std::int32_t>(r->deviceId);
  o.stream = static_cast<std::int32_t>(r->streamId);
  o.start_ns = raw(r->start);
  o.end_ns = raw(r->end);
  o.correlation_id = correlation;
  return o;
}

// GPU work is usable only with both ends: CUPTI writes 0 for both when it had no device memory
// for the timestamps, and a forced flush returns running work with its end still 0.
bool timed(std::uint64_t start, std::uint64_t end, LostRecords& lost) {
  if (start == 0 && end == 0) {
    ++lost.untimed;
    return false;
  }
  if (end == 0 || end < start) {
    ++lost.in_flight;
    return false;
  }
  return true;
}

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

std::optional<SyncKind> sync_kind_of_call(std::string_view n) noexcept {
  auto has = [&](std::string_view t) { return n.find(t) != std::string_view::npos; };
  if (has("StreamWaitEvent")) return SyncKind::StreamWaitEvent;
  if (!has("Synchronize")) return std::nullopt;
  if (has("StreamSynchronize")) return SyncKind::Stream;
  if (has("EventSynchronize")) return SyncKind::Event;
  if (has("DeviceSynchronize") || has("ThreadSynchronize")) return SyncKind::Device;
  if (has("CtxSynchronize")) return SyncKind::Context;
  return SyncKind::Unknown;
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

void parse_buffer(const Api& api, std::uint8_t* buffer, std::size_t valid_size,
                  ParsedBuffer& out) noexcept {
  if (!buffer || valid_size == 0 || !api.activity_get_next_record) return;
  try {
    GpuActivity& a = out.activity;
    // A runtime call and the driver call it makes inside share one correlation id: keep the
    // runtime one so a launch is counted once.
    std::unordered_set<std::uint64_t> runtime_ids;
    std::vector<std::size_t> driver_launches;  // indices into a.runtime_calls
    CUpti_Activity* record = nullptr;
    for (;;) {
      const CUptiResult r = api.activity_get_next_record(buffer, valid_size, &record);
      if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // the end of the buffer
      if (r == CUPTI_ERROR_INVALID_KIND) {
        // An incomplete record (a forced flush returned it early) ends the buffer: its size is
        // unknown, so what follows it cannot be read either. Counted once, as one record; the
        // rest of the buffer is not counted (its number of records is unknown).
        ++out.lost.incomplete;
        break;
      }
      if (r != CUPTI_SUCCESS) {
        check(api, r, "activity_get_next_record", "buffer, valid_size, &record");
        out.error = r;
        break;
      }
      ++out.records;
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
          if (!timed(k->start, k->end, out.lost)) break;
          KernelRecord& o = add_device_record(a.kernels, k, k->correlationId);
          // Only the prefix the aggregator classifies and interns is copied (kernel_name.h).
          o.name = kernel_name_prefix(k->name ? k->name : "");
          // CUPTI shares one name string among a kernel's records: its address keys the name.
          o.name_key = reinterpret_cast<std::uintptr_t>(k->name);
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
          if (!timed(m->start, m->end, out.lost)) break;
          // The runtime call (cudaMemcpyAsync) is what fathom's external ids were pushed around;
          // a copy issued straight through the driver has only the driver's id.
          MemcpyRecord& o = add_device_record(
              a.memcpys, m, m->runtimeCorrelationId ? m->runtimeCorrelationId : m->correlationId);
          o.kind = memcpy_kind(m->copyKind);
          o.src = memory_kind(m->srcKind);
          o.dst = memory_kind(m->dstKind);
          o.bytes = static_cast<std::int64_t>(m->bytes);
          o.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY2: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
          if (!timed(m->start, m->end, out.lost)) break;
          MemcpyRecord& o = add_device_record(a.memcpys, m, m->correlationId);
          o.kind = MemcpyKind::PeerToPeer;
          o.src = memory_kind(m->srcKind);
          o.dst = memory_kind(m->dstKind);
          o.bytes = static_cast<std::int64_t>(m->bytes);
          o.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
          if (!timed(m->start, m->end, out.lost)) break;
          MemsetRecord& o = add_device_record(a.memsets, m, m->correlationId);
          o.bytes = static_cast<std::int64_t>(m->bytes);
          break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
          const auto* c = reinterpret_cast<const CUpti_ActivityAPI*>(record);
          const bool runtime = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
          const std::string& name = callback_name(
              api, runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, c->cbid);
          // Without per-cbid selection every call of both domains arrives: keep what fathom
          // reads, by the same rule that selects what CUPTI records (api_selection.h).
          if (runtime ? !traced_runtime_api(name) : !traced_driver_api(name)) {
            ++out.skipped;
            break;
          }
          RuntimeCallRecord& o = a.runtime_calls.emplace_back();
          o.name = name;
          o.thread = c->threadId;
          o.start_ns = raw(c->start);
          o.end_ns = raw(c->end);
          o.correlation_id = c->correlationId;
          if (runtime) {
            runtime_ids.insert(c->correlationId);
          } else {
            driver_launches.push_back(a.runtime_calls.size() - 1);
          }
          // The host waiting on the device, from the call itself: CUDA 13's SYNCHRONIZATION
          // records would also bring every event and stream query (fathom's own polls too).
          if (auto kind = sync_kind_of_call(name)) {
            SyncRecord& s = a.syncs.emplace_back();
            s.kind = *kind;
            s.start_ns = o.start_ns;
            s.end_ns = o.end_ns;
            s.correlation_id = o.correlation_id;
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
