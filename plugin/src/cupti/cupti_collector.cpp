#include <fathom/clock.h>
#include <fathom/cupti_collector.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <list>
#include <mutex>

#include "activity_parser.h"
#include "correlation_table.h"
#include "cupti_api.h"

namespace fathom {

using cupti::Api;

namespace {

// CUPTI calls its buffer callbacks through plain function pointers with no user data, so the
// collector they serve is process-wide: one at a time, like CUPTI's activity API itself.
std::atomic<CuptiCollector::Impl*> g_collector{nullptr};
// Held while a buffer callback uses g_collector, and while a collector detaches from it.
std::mutex g_callback_mutex;

// The CUPTI that push/pop_external_id call: null while no collector collects. Api copies are
// kept for the life of the process so a thread still popping after a stop never sees a
// dangling table.
std::atomic<const Api*> g_external_api{nullptr};

const Api* keep_forever(const Api& api) {
  static std::mutex m;
  static std::list<Api> kept;  // list: elements never move
  std::lock_guard lock(m);
  return &kept.emplace_back(api);
}

struct ThreadExternalIds {
  const Api* api = nullptr;  // the CUPTI the ids on this thread were pushed to
  std::uint32_t depth[2] = {0, 0};
};
thread_local ThreadExternalIds t_external;

CUpti_ExternalCorrelationKind cupti_kind(ExternalIdKind k) {
  return k == ExternalIdKind::Op ? cupti::kOpCorrelation : cupti::kPhaseCorrelation;
}

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

void CUPTIAPI on_buffer_requested(std::uint8_t** buffer, std::size_t* size,
                                  std::size_t* max_records);
void CUPTIAPI on_buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                                  std::size_t size, std::size_t valid_size);

// The kinds fathom needs, and the ones it can do without (with what is lost then).
struct Kind {
  CUpti_ActivityKind kind;
  const char* name;
  const char* lost;  // nullptr: essential
};
constexpr Kind kKinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", nullptr},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", nullptr},
    {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", nullptr},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME", nullptr},
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION", nullptr},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION", "host synchronizations (CUPTI)"},
    {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER",
     "attribution of kernels launched through the CUDA driver API (Triton, cuBLASLt) to ops"},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2", "peer-to-peer copies between GPUs (CUPTI)"},
};

// Errors that mean another client holds what fathom asked for, rather than a missing piece.
bool held_by_another(CUptiResult r) {
  return r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED || r == CUPTI_ERROR_HARDWARE_BUSY ||
         r == CUPTI_ERROR_NOT_COMPATIBLE || r == CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED;
}

template <typename T>
void append(std::vector<T>& to, std::vector<T>& from) {
  if (to.empty()) {
    to = std::move(from);
  } else {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  }
}

std::size_t record_count(const GpuActivity& a) {
  return a.kernels.size() + a.memcpys.size() + a.memsets.size() + a.syncs.size() +
         a.runtime_calls.size() + a.ops.size();
}

}  // namespace

struct CuptiCollector::Impl {
  Impl(const Api& a, Sink s, CuptiConfig c)
      : api(a), sink(std::move(s)), config(std::move(c)), parser(api) {
    if (!config.getenv)
      config.getenv = [](const char* name) -> const char* { return std::getenv(name); };
    config.buffer_bytes = (std::max<std::size_t>(config.buffer_bytes, 64 * 1024) + 7) / 8 * 8;
  }
  ~Impl() {
    for (std::uint8_t* b : free_buffers) std::free(b);
  }

  bool start();
  void refuse(CuptiState s, std::string why);
  void request(std::uint8_t** buffer, std::size_t* size);
  void complete(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                std::size_t valid_size);
  void deliver();
  void detach();
  void disable_kinds();
  void fail(std::string why);
  void update_clock_offset();
  void note(std::string what, std::string why);

  Api api;
  Sink sink;
  CuptiConfig config;
  cupti::ActivityParser parser;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::vector<CUpti_ActivityKind> enabled;
  std::atomic<CuptiState> state{CuptiState::Unavailable};
  std::atomic<std::int64_t> clock_offset_ns{0};
  std::atomic<std::int64_t> dropped{0};

  mutable std::mutex mutex;  // everything below
  GpuActivity pending;
  std::size_t pending_records = 0;
  cupti::CorrelationTable table;
  std::vector<Unmeasured> notes;
  std::string failure;  // seen on CUPTI's thread; acted on by the next flush

  std::mutex buffers_mutex;
  std::vector<std::uint8_t*> free_buffers;
  std::size_t outstanding = 0;
};

namespace {

void CUPTIAPI on_buffer_requested(std::uint8_t** buffer, std::size_t* size,
                                  std::size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  std::lock_guard lock(g_callback_mutex);
  if (CuptiCollector::Impl* c = g_collector.load(std::memory_order_acquire))
    c->request(buffer, size);
}

void CUPTIAPI on_buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                                  std::size_t, std::size_t valid_size) {
  std::unique_lock lock(g_callback_mutex);
  if (CuptiCollector::Impl* c = g_collector.load(std::memory_order_acquire)) {
    c->complete(context, stream, buffer, valid_size);
  } else {
    std::free(buffer);  // a buffer handed out before its collector stopped
  }
}

}  // namespace

void CuptiCollector::Impl::note(std::string what, std::string why) {
  std::lock_guard lock(mutex);
  notes.push_back({std::move(what), std::move(why)});
}

void CuptiCollector::Impl::refuse(CuptiState s, std::string why) {
  state.store(s);
  note(kCuptiMeasurements, std::move(why));
}

void CuptiCollector::Impl::update_clock_offset() {
  // CUPTI stamps records on its own clock (CLOCK_REALTIME on Linux); fathom's phases use
  // now_ns(). The tightest of three bracketed readings gives the offset between them.
  std::int64_t best_span = INT64_MAX, offset = clock_offset_ns.load();
  for (int i = 0; i < 3; ++i) {
    std::uint64_t c = 0;
    const std::int64_t t0 = now_ns();
    if (!api.get_timestamp || api.get_timestamp(&c) != CUPTI_SUCCESS) return;
    const std::int64_t t1 = now_ns();
    if (t1 - t0 < best_span) {
      best_span = t1 - t0;
      offset = t0 + (t1 - t0) / 2 - static_cast<std::int64_t>(c);
    }
  }
  clock_offset_ns.store(offset);
}

bool CuptiCollector::Impl::start() {
  if (const char* tool = config.getenv("CUDA_INJECTION64_PATH"); tool && *tool) {
    refuse(CuptiState::Busy,
           std::string("another CUDA tool is attached (CUDA_INJECTION64_PATH=") + tool +
               "; Nsight Systems and Nsight Compute set it): fathom leaves CUPTI to it");
    return false;
  }
  if (const char* daemon = config.getenv("KINETO_USE_DAEMON");
      daemon && *daemon && std::string(daemon) != "0") {
    refuse(CuptiState::Busy,
           std::string("Kineto's on-demand profiling is enabled (KINETO_USE_DAEMON=") + daemon +
               "): fathom leaves CUPTI to torch.profiler");
    return false;
  }
  {
    CuptiCollector::Impl* none = nullptr;
    std::lock_guard lock(g_callback_mutex);
    if (!g_collector.compare_exchange_strong(none, this)) {
      refuse(CuptiState::Busy,
             "another fathom session in this process is collecting CUPTI activity");
      return false;
    }
  }
  const CUptiResult sub = FATHOM_CUPTI(api, subscribe, &subscriber, ignore_callback, nullptr);
  if (sub != CUPTI_SUCCESS) {
    detach();
    if (held_by_another(sub)) {
      refuse(
          CuptiState::Busy,
          "another CUPTI client holds CUPTI (cuptiSubscribe: " + cupti::result_text(api, sub) +
              "): torch.profiler (Kineto), Nsight Systems or another tool; fathom leaves it alone");
    } else {
      refuse(CuptiState::Unavailable,
             "CUPTI could not start (cuptiSubscribe: " + cupti::result_text(api, sub) + ")");
    }
    return false;
  }
  update_clock_offset();
  const CUptiResult reg =
      FATHOM_CUPTI(api, activity_register_callbacks, on_buffer_requested, on_buffer_completed);
  if (reg != CUPTI_SUCCESS) {
    detach();
    refuse(CuptiState::Unavailable, "CUPTI could not start (cuptiActivityRegisterCallbacks: " +
                                        cupti::result_text(api, reg) + ")");
    return false;
  }
  for (const Kind& k : kKinds) {
    const CUptiResult r = FATHOM_CUPTI(api, activity_enable, k.kind);
    if (r == CUPTI_SUCCESS) {
      enabled.push_back(k.kind);
    } else if (k.lost) {
      note(k.lost,
           std::string("cuptiActivityEnable(") + k.name + "): " + cupti::result_text(api, r));
    } else {
      disable_kinds();
      detach();
      const std::string what =
          std::string("cuptiActivityEnable(") + k.name + "): " + cupti::result_text(api, r);
      if (held_by_another(r)) {
        refuse(CuptiState::Busy,
               what + ": another CUPTI client holds the activity API; fathom leaves it alone");
      } else {
        refuse(CuptiState::Unavailable, "CUPTI activity collection could not start (" + what + ")");
      }
      return false;
    }
  }
  state.store(CuptiState::Collecting);
  g_external_api.store(keep_forever(api), std::memory_order_release);
  return true;
}

void CuptiCollector::Impl::disable_kinds() {
  for (auto it = enabled.rbegin(); it != enabled.rend(); ++it)
    FATHOM_CUPTI(api, activity_disable, *it);
  enabled.clear();
}

// Stops CUPTI from reaching this collector. Buffers CUPTI still holds are freed when they come
// back; the subscription is released so another client can take CUPTI.
void CuptiCollector::Impl::detach() {
  g_external_api.store(nullptr, std::memory_order_release);
  {
    std::lock_guard lock(g_callback_mutex);
    CuptiCollector::Impl* self = this;
    g_collector.compare_exchange_strong(self, nullptr);
  }
  if (subscriber) {
    FATHOM_CUPTI(api, unsubscribe, subscriber);
    subscriber = nullptr;
  }
}

void CuptiCollector::Impl::request(std::uint8_t** buffer, std::size_t* size) {
  std::lock_guard lock(buffers_mutex);
  std::uint8_t* b = nullptr;
  if (!free_buffers.empty()) {
    b = free_buffers.back();
    free_buffers.pop_back();
  } else if (outstanding < config.max_buffers) {
    // CUPTI wants 8-byte aligned buffers.
    b = static_cast<std::uint8_t*>(std::aligned_alloc(8, config.buffer_bytes));
  }
  if (!b) return;  // CUPTI drops the records it cannot store and counts them
  ++outstanding;
  *buffer = b;
  *size = config.buffer_bytes;
}

void CuptiCollector::Impl::complete(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                                    std::size_t valid_size) {
  cupti::ParsedBuffer parsed;
  parser.parse(buffer, valid_size, clock_offset_ns.load(), parsed);
  std::size_t cupti_dropped = 0;
  FATHOM_CUPTI(api, activity_get_num_dropped_records, context, stream, &cupti_dropped);
  {
    std::lock_guard lock(buffers_mutex);
    --outstanding;
    // Keep a few for reuse; give the rest back so a burst does not pin memory for the run.
    if (free_buffers.size() < 4) {
      free_buffers.push_back(buffer);
    } else {
      std::free(buffer);
    }
  }
  try {
    std::lock_guard lock(mutex);
    table.add(parsed.correlations);
    std::int64_t lost = static_cast<std::int64_t>(cupti_dropped);
    const std::size_t n = record_count(parsed.activity);
    if (pending_records + n > config.max_pending_records) {
      lost += static_cast<std::int64_t>(n);  // no step end for too long: keep memory bounded
    } else {
      GpuActivity& a = parsed.activity;
      append(pending.kernels, a.kernels);
      append(pending.memcpys, a.memcpys);
      append(pending.memsets, a.memsets);
      append(pending.syncs, a.syncs);
      append(pending.runtime_calls, a.runtime_calls);
      pending_records += n;
    }
    pending.dropped_records += lost;
    dropped.fetch_add(lost);
    if (parsed.error != CUPTI_SUCCESS && failure.empty()) {
      failure = "cuptiActivityGetNextRecord: " + cupti::result_text(api, parsed.error);
    }
  } catch (...) {
    dropped.fetch_add(1);  // out of memory: the buffer's records are lost; count at least one
  }
}

void CuptiCollector::Impl::deliver() {
  GpuActivity batch;
  {
    std::lock_guard lock(mutex);
    batch = std::move(pending);
    pending = GpuActivity{};
    pending_records = 0;
    table.attribute(batch);
    table.next_delivery();
  }
  if (record_count(batch) == 0 && batch.dropped_records == 0) return;
  try {
    if (sink) sink(std::move(batch));
  } catch (const std::exception& e) {
    std::cerr << "fathom: GPU activity could not be aggregated: " << e.what() << "\n";
  } catch (...) {
  }
}

void CuptiCollector::Impl::fail(std::string why) {
  disable_kinds();
  detach();
  state.store(CuptiState::Failed);
  note(kCuptiMeasurements,
       "CUPTI failed during the run (" + why +
           "); GPU activity after that point is not measured, phase timing goes on");
}

// --- CuptiCollector ---------------------------------------------------------------------------

CuptiCollector::CuptiCollector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CuptiCollector::~CuptiCollector() { stop(); }

std::unique_ptr<CuptiCollector> CuptiCollector::start(Sink sink, CuptiConfig config) {
  cupti::Loaded loaded = cupti::load_cupti();
  if (!loaded.ok) return unavailable(loaded.why);
  return start(loaded.api, std::move(sink), std::move(config));
}

std::unique_ptr<CuptiCollector> CuptiCollector::start(const Api& api, Sink sink,
                                                      CuptiConfig config) {
  auto impl = std::make_unique<Impl>(api, std::move(sink), std::move(config));
  impl->start();
  return std::unique_ptr<CuptiCollector>(new CuptiCollector(std::move(impl)));
}

std::unique_ptr<CuptiCollector> CuptiCollector::unavailable(std::string why) {
  auto impl = std::make_unique<Impl>(Api{}, Sink{}, CuptiConfig{});
  impl->refuse(CuptiState::Unavailable, "CUPTI is not available: " + why);
  return std::unique_ptr<CuptiCollector>(new CuptiCollector(std::move(impl)));
}

std::unique_ptr<CuptiCollector> CuptiCollector::busy(std::string why) {
  auto impl = std::make_unique<Impl>(Api{}, Sink{}, CuptiConfig{});
  impl->refuse(CuptiState::Busy, std::move(why));
  return std::unique_ptr<CuptiCollector>(new CuptiCollector(std::move(impl)));
}

CuptiState CuptiCollector::state() const noexcept { return impl_->state.load(); }

std::string CuptiCollector::library() const { return impl_->api.library; }

void CuptiCollector::flush(bool force) noexcept {
  Impl& c = *impl_;
  if (c.state.load() != CuptiState::Collecting) return;
  c.update_clock_offset();
  const CUptiResult r = FATHOM_CUPTI(c.api, activity_flush_all,
                                     force ? std::uint32_t{CUPTI_ACTIVITY_FLAG_FLUSH_FORCED} : 0u);
  c.deliver();
  std::string failure;
  {
    std::lock_guard lock(c.mutex);
    failure = c.failure;
  }
  if (r != CUPTI_SUCCESS) failure = "cuptiActivityFlushAll: " + cupti::result_text(c.api, r);
  if (!failure.empty()) c.fail(std::move(failure));
}

void CuptiCollector::add_op(OpRecord op) noexcept {
  Impl& c = *impl_;
  if (c.state.load(std::memory_order_relaxed) != CuptiState::Collecting) return;
  try {
    std::lock_guard lock(c.mutex);
    if (c.pending_records >= c.config.max_pending_records) {
      ++c.pending.dropped_records;
      c.dropped.fetch_add(1);
      return;
    }
    c.pending.ops.push_back(std::move(op));
    ++c.pending_records;
  } catch (...) {
    c.dropped.fetch_add(1);
  }
}

void CuptiCollector::yield(std::string why) noexcept {
  Impl& c = *impl_;
  CuptiState expected = CuptiState::Collecting;
  if (!c.state.compare_exchange_strong(expected, CuptiState::Stopped)) return;
  // The other client owns the activity API now: disabling kinds or flushing would take its
  // records away. Only fathom's own state goes, and the subscription it no longer needs.
  c.enabled.clear();
  c.detach();
  c.deliver();
  try {
    c.note(kCuptiMeasurements,
           std::move(why) + "; fathom stopped its CUPTI collection and left CUPTI to it");
  } catch (...) {
  }
}

void CuptiCollector::stop() noexcept {
  Impl& c = *impl_;
  CuptiState expected = CuptiState::Collecting;
  if (!c.state.compare_exchange_strong(expected, CuptiState::Stopped)) return;
  c.disable_kinds();
  FATHOM_CUPTI(c.api, activity_flush_all, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  c.detach();
  c.deliver();
}

std::int64_t CuptiCollector::dropped_records() const noexcept { return impl_->dropped.load(); }

std::vector<Unmeasured> CuptiCollector::not_measured() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->notes;
}

// --- external correlation ---------------------------------------------------------------------

void push_external_id(ExternalIdKind kind, std::uint64_t id) noexcept {
  const Api* api = g_external_api.load(std::memory_order_relaxed);
  if (!api) return;
  ThreadExternalIds& t = t_external;
  const int k = static_cast<int>(kind);
  // Ids pushed to an earlier CUPTI on this thread are popped there first (rare: a restart).
  if (t.api && t.api != api && (t.depth[0] || t.depth[1])) return;
  if (FATHOM_CUPTI(*api, activity_push_external_correlation_id, cupti_kind(kind), id) !=
      CUPTI_SUCCESS)
    return;
  t.api = api;
  ++t.depth[k];
}

void pop_external_id(ExternalIdKind kind) noexcept {
  ThreadExternalIds& t = t_external;
  const int k = static_cast<int>(kind);
  // Popped even after the collector stopped, so no id of fathom's stays on CUPTI's stack
  // for the next client to find.
  if (t.depth[k] == 0 || !t.api) return;
  --t.depth[k];
  std::uint64_t last = 0;
  FATHOM_CUPTI(*t.api, activity_pop_external_correlation_id, cupti_kind(kind), &last);
}

bool external_ids_enabled() noexcept {
  return g_external_api.load(std::memory_order_relaxed) != nullptr;
}

std::uint64_t phase_external_id(Phase p) noexcept { return cupti::phase_correlation_id(p); }

}  // namespace fathom
