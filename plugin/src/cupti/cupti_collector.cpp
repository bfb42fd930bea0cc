// The CUPTI collector: arming CUPTI's activity API for fathom, standing aside for other clients,
// resuming, and turning the buffers CUPTI gives back into batches for the sink.
//
// Ownership rules (issue 12): fathom holds no callback subscription; its buffer callbacks make
// no CUPTI call and take only the buffer registry's locks; buffers are parsed on the training
// thread at flushes; timestamps go through a measured clock fit; the runtime and driver calls
// recorded are the ones fathom reads.
#include <fathom/clock.h>
#include <fathom/cupti_collector.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <list>
#include <mutex>
#include <set>
#include <utility>

#include "activity_parser.h"
#include "api_selection.h"
#include "buffer_registry.h"
#include "clock_alignment.h"
#include "correlation_table.h"
#include "cupti_api.h"
#include "subscriber_probe.h"

namespace fathom {

using cupti::Api;

namespace {

// One collector collects per process, like CUPTI's activity API itself.
std::atomic<CuptiCollector::Impl*> g_active{nullptr};

// The CUPTI that push/pop_external_id call: null while no collector collects. Api copies are
// kept for the life of the process so a thread still popping after a stop never sees a
// dangling table.
std::atomic<const Api*> g_external_api{nullptr};
// CUpti_ActivityThreadIdType in effect, read when a collector arms.
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

// The activity kinds fathom enables, and what is lost without the optional ones. The runtime
// and driver calls are enabled one cbid at a time (api_selection.h); SYNCHRONIZATION is not
// enabled: CUDA 13 adds every event and stream query to it, and fathom reads host waits from
// the synchronizing calls themselves.
struct Kind {
  CUpti_ActivityKind kind;
  const char* name;
  const char* lost;  // nullptr: essential
  bool fathom_only;  // Kineto never enables it: disabled when fathom stands aside
};
constexpr Kind kKinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", nullptr, false},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", nullptr, false},
    {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", nullptr, false},
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION", nullptr, false},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2", "peer-to-peer copies between GPUs (CUPTI)", true},
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

std::string fixed3(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

}  // namespace

struct CuptiCollector::Impl {
  enum class Aside { None, KnownClient, Displaced, Yielded };

  Impl(const Api& a, Sink s, CuptiConfig c) : api(a), sink(std::move(s)), config(std::move(c)) {
    if (!config.getenv)
      config.getenv = [](const char* name) -> const char* { return std::getenv(name); };
  }
  ~Impl() {
    if (owner) {
      cupti::BufferRegistry::get().disarm(owner.get());
      owner->retire();
    }
    CuptiCollector::Impl* self = this;
    g_active.compare_exchange_strong(self, nullptr);
  }

  bool start();
  // taken_over: another client had CUPTI since the last arming, so fathom's buffers it still
  // held went to that client.
  bool arm(bool taken_over = false);
  void disable_all();
  void refuse(CuptiState s, std::string why);
  void note(std::string what, std::string why);
  void note_once(const char* key, std::string what, std::string why);
  std::string where() const;
  const KnownClient* active_client() const noexcept;
  bool known_holder(const std::string& holder) const;
  cupti::ClockSample sample() const;
  void calibrate();
  void collect_completed();
  void deliver();
  void stand_aside(Aside reason, std::string who);
  void resume(const std::string& why, bool taken_over);
  void check_ownership(bool forced);
  void fail(std::string why);

  Api api;
  Sink sink;
  CuptiConfig config;
  std::shared_ptr<cupti::BufferOwner> owner;
  std::atomic<CuptiState> state{CuptiState::Unavailable};
  std::atomic<std::int64_t> dropped{0};
  std::atomic<std::size_t> traced_calls{0};

  // What fathom enabled, to undo exactly that.
  std::vector<CUpti_ActivityKind> enabled;
  std::vector<std::uint32_t> runtime_cbids, driver_cbids;
  bool whole_domains = false;  // no per-cbid API: RUNTIME and DRIVER enabled whole
  bool selected = false;

  cupti::ClockAlignment clock;
  std::int64_t armed_at_ns = 0;
  std::set<std::pair<CUcontext, std::uint32_t>> queues;  // for CUPTI's dropped counts
  std::uint64_t last_heartbeat = 0;
  int silent_flushes = 0;
  Aside aside = Aside::None;
  std::string aside_who, aside_from;
  std::uint64_t foreign_seen = 0;

  mutable std::mutex mutex;  // everything below; never held around a CUPTI call
  GpuActivity pending;
  std::size_t pending_records = 0;
  cupti::CorrelationTable table;
  std::vector<Unmeasured> notes;
  std::set<std::string> noted;
};

void CuptiCollector::Impl::note(std::string what, std::string why) {
  try {
    std::lock_guard lock(mutex);
    notes.push_back({std::move(what), std::move(why)});
  } catch (...) {
  }
}

void CuptiCollector::Impl::note_once(const char* key, std::string what, std::string why) {
  {
    std::lock_guard lock(mutex);
    if (!noted.insert(key).second) return;
  }
  note(std::move(what), std::move(why));
}

void CuptiCollector::Impl::refuse(CuptiState s, std::string why) {
  state.store(s);
  note(kCuptiMeasurements, std::move(why));
}

std::string CuptiCollector::Impl::where() const {
  try {
    return config.where ? config.where() : std::string();
  } catch (...) {
    return {};
  }
}

const KnownClient* CuptiCollector::Impl::active_client() const noexcept {
  for (const KnownClient& k : config.known_clients) {
    try {
      if (k.active && k.active()) return &k;
    } catch (...) {
    }
  }
  return nullptr;
}

bool CuptiCollector::Impl::known_holder(const std::string& holder) const {
  if (config.known_clients.empty()) return false;
  if (holder.empty()) return true;  // torch 2.11's Kineto subscribes without a name
  for (const KnownClient& k : config.known_clients)
    for (const std::string& n : k.subscriber_names)
      if (!n.empty() && holder.find(n) != std::string::npos) return true;
  return false;
}

cupti::ClockSample CuptiCollector::Impl::sample() const {
  // The tightest of three bracketed readings.
  cupti::ClockSample best;
  std::int64_t best_span = INT64_MAX;
  for (int i = 0; i < 3; ++i) {
    std::uint64_t c = 0;
    const std::int64_t t0 = now_ns();
    if (!api.get_timestamp || api.get_timestamp(&c) != CUPTI_SUCCESS) break;
    const std::int64_t t1 = now_ns();
    if (t1 - t0 < best_span) {
      best_span = t1 - t0;
      best = {t0 + (t1 - t0) / 2, c};
    }
  }
  return best;
}

// Two readings a little apart give the unit: spent once per arming, never per step.
void CuptiCollector::Impl::calibrate() {
  const cupti::ClockSample a = sample();
  cupti::ClockSample b = a;
  while (b.host_ns - a.host_ns < 2 * cupti::ClockAlignment::kMinBaselineNs) b = sample();
  clock.reset(a, b);
  if (!clock.nanoseconds()) {
    note_once("clock-unit", kCuptiMeasurements,
              "CUPTI's timestamps are not nanoseconds in this process (" +
                  fixed3(clock.ticks_per_ns()) +
                  " ticks per ns: another CUPTI client registered a timestamp callback, as "
                  "torch.profiler does); fathom measures the rate and converts them onto its "
                  "clock");
  }
}

bool CuptiCollector::Impl::start() {
  if (const char* tool = config.getenv("CUDA_INJECTION64_PATH"); tool && *tool) {
    refuse(CuptiState::Busy,
           std::string("another CUDA tool is attached (CUDA_INJECTION64_PATH=") + tool +
               "; Nsight Systems and Nsight Compute set it): fathom leaves CUPTI to it; under "
               "Nsight Systems, `nsys export --type sqlite` then `fathom analyze` gives the GPU "
               "section from the capture");
    return false;
  }
  if (const char* daemon = config.getenv("KINETO_USE_DAEMON");
      daemon && *daemon && std::string(daemon) != "0") {
    refuse(CuptiState::Busy,
           std::string("Kineto's on-demand profiling is enabled (KINETO_USE_DAEMON=") + daemon +
               "): a trace may start at any moment, so fathom leaves CUPTI to torch.profiler");
    return false;
  }
  {
    CuptiCollector::Impl* none = nullptr;
    if (!g_active.compare_exchange_strong(none, this)) {
      refuse(CuptiState::Busy,
             "another fathom session in this process is collecting CUPTI activity");
      return false;
    }
  }
  // Who holds the subscription says whether another tool owns CUPTI. fathom keeps none.
  const cupti::SubscriberProbe probe = cupti::probe_subscriber(api);
  if (probe.held && !known_holder(probe.holder)) {
    const std::string who =
        probe.holder.empty() ? std::string("another CUPTI client") : "\"" + probe.holder + "\"";
    refuse(CuptiState::Busy, who + " holds CUPTI's subscription (cuptiSubscribe: " +
                                 cupti::result_text(api, probe.result) +
                                 "): fathom leaves CUPTI to it");
    return false;
  }
  if (!probe.held && probe.result != CUPTI_SUCCESS) {
    refuse(CuptiState::Unavailable,
           "CUPTI could not start (cuptiSubscribe: " + cupti::result_text(api, probe.result) + ")");
    return false;
  }
  owner = std::make_shared<cupti::BufferOwner>(std::max<std::size_t>(config.buffer_bytes, 64 << 10),
                                               std::max<std::size_t>(config.max_buffers, 2));
  if (const KnownClient* k = active_client()) {
    // It has CUPTI now: fathom waits its turn instead of giving up for the run.
    state.store(CuptiState::StandingAside);
    aside = Aside::KnownClient;
    aside_who = k->name;
    aside_from = where();
    note(kCuptiMeasurements, k->name +
                                 " is collecting at the session start: fathom stands aside "
                                 "and collects once it is done");
    return true;
  }
  return arm();
}

// Registers fathom's callbacks and enables what it reads. Also what resuming does.
bool CuptiCollector::Impl::arm(bool taken_over) {
  if (api.get_thread_id_type) {
    CUpti_ActivityThreadIdType t = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
    if (api.get_thread_id_type(&t) == CUPTI_SUCCESS) g_thread_id_type.store(static_cast<int>(t));
  }
  if (!selected) {
    whole_domains = !api.activity_enable_runtime_api || !api.activity_enable_driver_api;
    if (!whole_domains) {
      runtime_cbids = cupti::traced_cbids(api, CUPTI_CB_DOMAIN_RUNTIME_API);
      driver_cbids = cupti::traced_cbids(api, CUPTI_CB_DOMAIN_DRIVER_API);
    }
    selected = true;
  }
  calibrate();
  armed_at_ns = now_ns();
  cupti::BufferRegistry& registry = cupti::BufferRegistry::get();
  const std::uint64_t generation = registry.next_generation();
  if (taken_over) {
    if (const std::size_t lost = registry.write_off(owner.get(), generation)) {
      note(kCuptiMeasurements,
           std::to_string(lost) + " of fathom's activity buffers went to " +
               (aside_who.empty() ? std::string("another CUPTI client") : aside_who) +
               " when it took CUPTI; the records in them are lost");
    }
  }
  registry.arm(owner);
  const CUptiResult reg =
      FATHOM_CUPTI(api, activity_register_callbacks, &cupti::BufferRegistry::on_request,
                   &cupti::BufferRegistry::on_complete);
  if (reg != CUPTI_SUCCESS) {
    registry.disarm(owner.get());
    refuse(CuptiState::Unavailable, "CUPTI could not start (cuptiActivityRegisterCallbacks: " +
                                        cupti::result_text(api, reg) + ")");
    return false;
  }
  auto undo = [&](CuptiState s, std::string why) {
    disable_all();
    registry.disarm(owner.get());
    refuse(s, std::move(why));
    return false;
  };
  for (const Kind& k : kKinds) {
    const CUptiResult r = FATHOM_CUPTI(api, activity_enable, k.kind);
    if (r == CUPTI_SUCCESS) {
      enabled.push_back(k.kind);
    } else if (k.lost) {
      note_once(k.name, k.lost,
                std::string("cuptiActivityEnable(") + k.name + "): " + cupti::result_text(api, r));
    } else {
      const std::string what =
          std::string("cuptiActivityEnable(") + k.name + "): " + cupti::result_text(api, r);
      if (held_by_another(r))
        return undo(CuptiState::Busy,
                    what + ": another CUPTI client holds the activity API; fathom leaves it alone");
      return undo(CuptiState::Unavailable,
                  "CUPTI activity collection could not start (" + what + ")");
    }
  }
  if (whole_domains) {
    note_once("whole-domains", "the cost of recording only the CUDA calls fathom reads",
              "this CUPTI has no cuptiActivityEnableRuntimeApi/DriverApi: every runtime and "
              "driver call is recorded and the ones fathom does not read are dropped");
    for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
      const CUptiResult r = FATHOM_CUPTI(api, activity_enable, k);
      if (r != CUPTI_SUCCESS)
        return undo(CuptiState::Unavailable,
                    "CUPTI activity collection could not start (cuptiActivityEnable(" +
                        std::string(k == CUPTI_ACTIVITY_KIND_RUNTIME ? "RUNTIME" : "DRIVER") +
                        "): " + cupti::result_text(api, r) + ")");
      enabled.push_back(k);
    }
  } else {
    for (std::uint32_t cbid : runtime_cbids)
      FATHOM_CUPTI(api, activity_enable_runtime_api, cbid, 1);
    for (std::uint32_t cbid : driver_cbids) FATHOM_CUPTI(api, activity_enable_driver_api, cbid, 1);
  }
  last_heartbeat = owner->heartbeat();
  silent_flushes = 0;
  traced_calls.store(0);
  aside = Aside::None;
  state.store(CuptiState::Collecting);
  g_external_api.store(keep_forever(api), std::memory_order_release);
  return true;
}

// Undoes what fathom enabled. Only while CUPTI is fathom's: another client's kinds are its own.
void CuptiCollector::Impl::disable_all() {
  for (auto it = enabled.rbegin(); it != enabled.rend(); ++it)
    FATHOM_CUPTI(api, activity_disable, *it);
  enabled.clear();
  if (!whole_domains) {
    for (std::uint32_t cbid : runtime_cbids)
      FATHOM_CUPTI(api, activity_enable_runtime_api, cbid, 0);
    for (std::uint32_t cbid : driver_cbids) FATHOM_CUPTI(api, activity_enable_driver_api, cbid, 0);
  }
}

// Parses what CUPTI gave back: on the calling thread, with no fathom lock held across a CUPTI
// call (the parser calls cuptiActivityGetNextRecord and cuptiGetCallbackName).
void CuptiCollector::Impl::collect_completed() {
  if (!owner) return;
  std::vector<cupti::CompletedBuffer> done = owner->take_completed();
  CUptiResult error = CUPTI_SUCCESS;
  for (const cupti::CompletedBuffer& b : done) {
    cupti::ParsedBuffer parsed;
    // After a real failure the rest are only given back: their records are not trusted.
    if (error == CUPTI_SUCCESS) cupti::parse_buffer(api, b.data, b.valid, parsed);
    owner->recycle(b);
    try {
      queues.insert({b.context, b.stream});
    } catch (...) {
    }
    const std::int64_t lost = parsed.lost.total();
    if (parsed.lost.incomplete)
      note_once("incomplete", "GPU records still incomplete at a forced flush",
                "CUPTI returned them before they were written (the rest of each such buffer "
                "cannot be read); counted as dropped");
    if (parsed.lost.in_flight)
      note_once("in-flight", "GPU work still running at a forced flush",
                "its records have no end time; counted as dropped, never aggregated");
    if (parsed.lost.untimed)
      note_once("untimed", "GPU records without timestamps",
                "CUPTI had no device memory for them (CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE); "
                "counted as dropped");
    try {
      std::lock_guard lock(mutex);
      table.add(parsed.correlations);
      const std::size_t n = record_count(parsed.activity);
      std::int64_t over = 0;
      if (pending_records + n > config.max_pending_records) {
        over = static_cast<std::int64_t>(n);  // no step end for too long: keep memory bounded
      } else {
        GpuActivity& a = parsed.activity;
        append(pending.kernels, a.kernels);
        append(pending.memcpys, a.memcpys);
        append(pending.memsets, a.memsets);
        append(pending.syncs, a.syncs);
        append(pending.runtime_calls, a.runtime_calls);
        pending_records += n;
      }
      pending.dropped_records += lost + over;
      dropped.fetch_add(lost + over);
    } catch (...) {
      dropped.fetch_add(1);
    }
    if (parsed.error != CUPTI_SUCCESS) error = parsed.error;
  }
  if (error != CUPTI_SUCCESS) {
    fail("cuptiActivityGetNextRecord: " + cupti::result_text(api, error));
    return;
  }
  // CUPTI's own count, per queue, read and reset outside every callback.
  std::int64_t cupti_dropped = 0;
  std::set<std::pair<CUcontext, std::uint32_t>> qs = queues;
  qs.emplace(nullptr, 0);  // the global queue, also when none of its buffers came back
  for (const auto& [context, stream] : qs) {
    std::size_t n = 0;
    if (FATHOM_CUPTI(api, activity_get_num_dropped_records, context, stream, &n) == CUPTI_SUCCESS)
      cupti_dropped += static_cast<std::int64_t>(n);
  }
  if (cupti_dropped) {
    dropped.fetch_add(cupti_dropped);
    std::lock_guard lock(mutex);
    pending.dropped_records += cupti_dropped;
  }
  const std::uint64_t foreign = cupti::BufferRegistry::get().foreign_buffers();
  if (foreign > foreign_seen) {
    foreign_seen = foreign;
    note_once("foreign", kCuptiMeasurements,
              "buffers of another CUPTI client came back through fathom's callbacks after fathom "
              "registered them (" +
                  std::to_string(foreign) +
                  " so far); fathom leaves them alone, and that client loses those records");
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
  // GPU and API records carry CUPTI's time; ops are on fathom's clock already.
  const std::int64_t earliest = armed_at_ns - 1'000'000'000, latest = now_ns() + 50'000'000;
  std::int64_t unaligned = 0;
  auto move = [&](auto& records) {
    std::size_t keep = 0;
    for (std::size_t i = 0; i < records.size(); ++i) {
      auto& r = records[i];
      r.start_ns = clock.to_host(static_cast<std::uint64_t>(r.start_ns));
      r.end_ns = clock.to_host(static_cast<std::uint64_t>(r.end_ns));
      // A record stamped by another clock source (a timestamp callback registered between two
      // flushes) lands nowhere near the run: dropped and counted rather than misplaced.
      if (r.start_ns < earliest || r.end_ns > latest || r.end_ns < r.start_ns) {
        ++unaligned;
        continue;
      }
      if (keep != i) records[keep] = std::move(r);
      ++keep;
    }
    records.resize(keep);
  };
  move(batch.kernels);
  move(batch.memcpys);
  move(batch.memsets);
  move(batch.syncs);
  move(batch.runtime_calls);
  if (unaligned) {
    batch.dropped_records += unaligned;
    dropped.fetch_add(unaligned);
    note_once("unaligned", "GPU records in another clock unit",
              "records stamped before CUPTI's timestamp source changed could not be placed on "
              "fathom's clock; counted as dropped");
  }
  if (record_count(batch) == 0 && batch.dropped_records == 0) return;
  try {
    if (sink) sink(std::move(batch));
  } catch (const std::exception& e) {
    std::cerr << "fathom: GPU activity could not be aggregated: " << e.what() << "\n";
  } catch (...) {
  }
}

void CuptiCollector::Impl::stand_aside(Aside reason, std::string who) {
  if (state.load() != CuptiState::Collecting) return;
  // fathom's ids must not reach the other client's records.
  g_external_api.store(nullptr, std::memory_order_release);
  state.store(CuptiState::StandingAside);
  aside = reason;
  aside_who = std::move(who);
  aside_from = where();
  // Empty fathom's buffers out of CUPTI: with the device idle a forced flush cuts no record, and
  // every queue starts on the other client's buffers. Without a way to wait, only what is
  // complete goes (the rest reaches the other client, which drops a buffer it did not allocate).
  bool waited = false;
  if (reason == Aside::KnownClient && config.synchronize_device) {
    try {
      config.synchronize_device();
      waited = true;
    } catch (...) {
    }
  }
  FATHOM_CUPTI(api, activity_flush_all,
               waited ? std::uint32_t{CUPTI_ACTIVITY_FLAG_FLUSH_FORCED} : 0u);
  collect_completed();
  deliver();
  // The kinds only fathom uses would reach the other client as records it never asked for; the
  // shared ones (kernels, copies, the runtime and driver calls) it enabled itself: left alone.
  for (auto it = enabled.begin(); it != enabled.end();) {
    const Kind* k = nullptr;
    for (const Kind& c : kKinds)
      if (c.kind == *it) k = &c;
    if (k && k->fathom_only) {
      FATHOM_CUPTI(api, activity_disable, *it);
      it = enabled.erase(it);
    } else {
      ++it;
    }
  }
  const std::string from = aside_from.empty() ? std::string() : " at " + aside_from;
  if (reason == Aside::Displaced) {
    note(kCuptiMeasurements,
         "fathom's CUPTI buffers stopped coming back" + from +
             " although the loop made CUDA calls: another CUPTI client took CUPTI's activity "
             "callbacks; fathom stands aside, and GPU activity from there is not measured");
  } else {
    note(kCuptiMeasurements, aside_who + " took CUPTI" + from +
                                 ": fathom stands aside so its trace keeps every GPU event; GPU "
                                 "activity from there is not measured until it is done");
  }
}

void CuptiCollector::Impl::resume(const std::string& why, bool taken_over) {
  const std::string from = aside_from;
  if (!arm(taken_over)) return;  // arm() said why
  const std::string to = where();
  std::string span;
  if (!from.empty() && !to.empty()) span = " from " + from + " to " + to;
  note(kCuptiMeasurements, "fathom resumed CUPTI collection" + (to.empty() ? "" : " at " + to) +
                               " (" + why + "): GPU activity" + span + " is not measured");
}

void CuptiCollector::Impl::check_ownership(bool forced) {
  const CuptiState s = state.load();
  const std::uint64_t heartbeat = owner ? owner->heartbeat() : 0;
  const std::size_t calls = traced_calls.exchange(0);
  if (s == CuptiState::Collecting) {
    if (const KnownClient* k = active_client()) {
      stand_aside(Aside::KnownClient, k->name);
      return;
    }
    if (calls > 0) silent_flushes = heartbeat == last_heartbeat ? silent_flushes + 1 : 0;
    last_heartbeat = heartbeat;
    if (silent_flushes >= std::max(config.displacement_flushes, 1))
      stand_aside(Aside::Displaced, "another CUPTI client");
    return;
  }
  if (s != CuptiState::StandingAside) return;
  switch (aside) {
    case Aside::KnownClient:
    case Aside::Yielded:
      if (!config.known_clients.empty() && !active_client())
        resume(aside_who + " is done", /*taken_over=*/true);
      break;
    case Aside::Displaced:
      if (heartbeat != last_heartbeat) {
        // fathom's callbacks still get buffers: nobody took them after all.
        resume("its buffers came back: no other client had taken CUPTI", /*taken_over=*/false);
      } else if (forced && !config.known_clients.empty() && !active_client()) {
        // The device is idle and the forced flush brought nothing: the taker registered its
        // callbacks and went. A known client that is done now is the likely one; any other
        // subscriber that names itself keeps CUPTI.
        const cupti::SubscriberProbe probe = cupti::probe_subscriber(api);
        if (!probe.held || known_holder(probe.holder))
          resume("the client that took CUPTI is gone", /*taken_over=*/true);
      }
      last_heartbeat = heartbeat;
      break;
    case Aside::None:
      break;
  }
}

void CuptiCollector::Impl::fail(std::string why) {
  if (state.load() == CuptiState::Collecting) disable_all();
  g_external_api.store(nullptr, std::memory_order_release);
  if (owner) cupti::BufferRegistry::get().disarm(owner.get());
  state.store(CuptiState::Failed);
  const std::string at = where();
  note(kCuptiMeasurements, "CUPTI failed during the run (" + why +
                               "); GPU activity after that point is not measured, phase timing "
                               "goes on" +
                               (at.empty() ? std::string() : " (from " + at + ")"));
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

bool CuptiCollector::live() const noexcept {
  const CuptiState s = state();
  return s == CuptiState::Collecting || s == CuptiState::StandingAside;
}

std::string CuptiCollector::library() const { return impl_->api.library; }

void CuptiCollector::flush(bool force) noexcept {
  Impl& c = *impl_;
  const CuptiState s = c.state.load();
  if (s != CuptiState::Collecting && s != CuptiState::StandingAside) return;
  try {
    // While standing aside for a client that collects now, nothing of CUPTI's is touched: a
    // flush would hand that client its buffers early, a forced one would cut its records.
    const bool touch = s == CuptiState::Collecting || c.aside == Impl::Aside::Displaced;
    CUptiResult r = CUPTI_SUCCESS;
    if (touch) {
      if (s == CuptiState::Collecting) {
        const cupti::ClockSample now = c.sample();
        if (!c.clock.add(now)) {
          c.note_once("clock-source", kCuptiMeasurements,
                      "CUPTI's timestamp source changed during the run" +
                          (c.where().empty() ? std::string() : " at " + c.where()) +
                          " (another client registered a timestamp callback): fathom measured "
                          "the new unit and goes on");
          c.calibrate();
        }
      }
      r = FATHOM_CUPTI(c.api, activity_flush_all,
                       force ? std::uint32_t{CUPTI_ACTIVITY_FLAG_FLUSH_FORCED} : 0u);
    }
    c.collect_completed();
    c.deliver();
    if (r != CUPTI_SUCCESS && c.state.load() == CuptiState::Collecting) {
      c.fail("cuptiActivityFlushAll: " + cupti::result_text(c.api, r));
      return;
    }
    c.check_ownership(force);
  } catch (...) {
  }
}

void CuptiCollector::check_clients() noexcept {
  Impl& c = *impl_;
  if (c.state.load(std::memory_order_relaxed) != CuptiState::Collecting) return;
  try {
    if (const KnownClient* k = c.active_client()) c.stand_aside(Impl::Aside::KnownClient, k->name);
  } catch (...) {
  }
}

void CuptiCollector::note_traced_calls(std::size_t n) noexcept {
  impl_->traced_calls.fetch_add(n, std::memory_order_relaxed);
}

void CuptiCollector::add_op(OpRecord op) noexcept {
  Impl& c = *impl_;
  if (c.state.load(std::memory_order_relaxed) != CuptiState::Collecting) return;
  // An eligible op launches work through calls fathom records.
  c.traced_calls.fetch_add(1, std::memory_order_relaxed);
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
  try {
    if (c.state.load() != CuptiState::Collecting) return;
    c.stand_aside(Impl::Aside::Yielded, why);
  } catch (...) {
  }
}

void CuptiCollector::stop() noexcept {
  Impl& c = *impl_;
  const CuptiState s = c.state.load();
  if (s != CuptiState::Collecting && s != CuptiState::StandingAside) return;
  c.state.store(CuptiState::Stopped);
  g_external_api.store(nullptr, std::memory_order_release);
  try {
    if (s == CuptiState::Collecting) {
      c.disable_all();
      FATHOM_CUPTI(c.api, activity_flush_all, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
    // Standing aside: CUPTI is another client's; its kinds and buffers stay as they are.
    c.collect_completed();
    if (c.owner) cupti::BufferRegistry::get().disarm(c.owner.get());
    c.deliver();
  } catch (...) {
  }
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
