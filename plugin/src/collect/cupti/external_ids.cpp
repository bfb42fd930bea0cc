#include "collect/cupti/external_ids.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <list>
#include <mutex>

#include "collect/cupti/correlation_table.h"
#include "collect/cupti/cupti_collector.h"

namespace fathom {

using cupti::Api;

namespace {

std::atomic<const Api*> g_external_api{nullptr};
std::atomic<int> g_thread_id_type{CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT};

const Api* keep_forever(const Api& api) {
  static std::mutex m;
  static std::list<Api> kept;  // list: elements never move
  std::lock_guard lock(m);
  for (const Api& k : kept)
    if (k.activity_push_external_correlation_id == api.activity_push_external_correlation_id)
      return &k;
  return &kept.emplace_back(api);
}

struct ThreadExternalIds {
  const Api* api = nullptr;  // the CUPTI the ids on this thread were pushed to
  std::uint32_t depth[2] = {0, 0};
};
thread_local ThreadExternalIds t_external;

}  // namespace

namespace collector {

void set_external_api(const Api* api) noexcept {
  const Api* kept = nullptr;
  if (api) {
    try {
      kept = keep_forever(*api);
    } catch (...) {
      return;  // out of memory: no ids pushed, no harm done
    }
  }
  g_external_api.store(kept, std::memory_order_release);
}

void set_thread_id_type(int type) noexcept { g_thread_id_type.store(type); }

void withdraw_external_ids() noexcept {
  ThreadExternalIds& t = t_external;
  if (!t.api) return;
  // Both kinds share one CUPTI stack (kFathomCorrelation): as many pops as pushes.
  for (std::uint32_t& d : t.depth) {
    for (; d > 0; --d) {
      std::uint64_t last = 0;
      FATHOM_CUPTI(*t.api, activity_pop_external_correlation_id, cupti::kFathomCorrelation, &last);
    }
  }
}

}  // namespace collector

void push_external_id(ExternalIdKind kind, std::uint64_t id) noexcept {
  const Api* api = g_external_api.load(std::memory_order_relaxed);
  if (!api) return;
  ThreadExternalIds& t = t_external;
  const int k = static_cast<int>(kind);
  // Ids pushed to an earlier CUPTI on this thread are popped there first (rare: a restart).
  if (t.api && t.api != api && (t.depth[0] || t.depth[1])) return;
  const std::uint64_t value = kind == ExternalIdKind::Op ? (id | cupti::kOpIdBit) : id;
  if (FATHOM_CUPTI(*api, activity_push_external_correlation_id, cupti::kFathomCorrelation, value) !=
      CUPTI_SUCCESS)
    return;
  t.api = api;
  ++t.depth[k];
}

void pop_external_id(ExternalIdKind kind) noexcept {
  ThreadExternalIds& t = t_external;
  const int k = static_cast<int>(kind);
  // Popped even after the collector stopped, so no id of fathom's stays on CUPTI's stack.
  if (t.depth[k] == 0 || !t.api) return;
  --t.depth[k];
  std::uint64_t last = 0;
  FATHOM_CUPTI(*t.api, activity_pop_external_correlation_id, cupti::kFathomCorrelation, &last);
}

bool external_ids_enabled() noexcept {
  return g_external_api.load(std::memory_order_relaxed) != nullptr;
}

std::uint64_t phase_external_id(Phase p) noexcept { return cupti::phase_correlation_id(p); }

std::uint64_t cupti_thread_id() noexcept {
  if (g_thread_id_type.load(std::memory_order_relaxed) == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
    return static_cast<std::uint32_t>(::syscall(SYS_gettid));
  return static_cast<std::uint32_t>(pthread_self());
}

}  // namespace fathom
