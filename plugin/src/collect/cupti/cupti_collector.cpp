// The CUPTI collector: starting, arming CUPTI's activity API for fathom, stopping, failing, and
// the public class. The record path is in collector_records.cpp, sharing CUPTI with other
// clients in collector_ownership.cpp, external ids in external_ids.cpp.
//
// Ownership rules (issue 12): fathom holds no callback subscription; its buffer callbacks make
// no CUPTI call and take only the buffer registry's locks; buffers are parsed on the training
// thread at flushes; timestamps go through a measured clock fit; the runtime and driver calls
// recorded are the ones fathom reads.
#include "collect/cupti/cupti_collector.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <utility>

#include "base/warning_sink.h"
#include "collect/clock.h"
#include "collect/cupti/api_selection.h"
#include "collect/cupti/collector_impl.h"
#include "collect/cupti/cupti_api.h"
#include "collect/cupti/external_ids.h"
#include "collect/cupti/subscriber_probe.h"

namespace fathom {

using collector::Kind;
using collector::kKinds;
using collector::record_count;
using cupti::Api;

namespace {

// One collector collects per process, like CUPTI's activity API itself.
std::atomic<CuptiCollector::Impl*> g_active{nullptr};

// Errors that mean another client holds what fathom asked for, rather than a missing piece.
bool held_by_another(CUptiResult r) {
  return r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED || r == CUPTI_ERROR_HARDWARE_BUSY ||
         r == CUPTI_ERROR_NOT_COMPATIBLE || r == CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED;
}

std::string fixed3(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

}  // namespace

CuptiCollector::Impl::Impl(const Api& a, Sink s, CuptiConfig c)
    : api(a), sink(std::move(s)), config(std::move(c)) {
  if (!config.getenv)
    config.getenv = [](const char* name) -> const char* { return std::getenv(name); };
}

CuptiCollector::Impl::~Impl() {
  if (owner) {
    cupti::BufferRegistry::get().disarm(owner.get());
    owner->retire();
  }
  CuptiCollector::Impl* self = this;
  g_active.compare_exchange_strong(self, nullptr);
}

void CuptiCollector::Impl::note(std::string what, std::string why) {
  try {
    std::lock_guard lock(mutex);
    notes.push_back({std::move(what), std::move(why), UnmeasuredId::GpuActivity});
  } catch (...) {
    detail::swallowed("collect/cupti/cupti_collector.cpp");
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
      best = {t0 + (t1 - t0) / 2, c, t1 - t0};
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
    // Nsight Systems' capture holds everything fathom would have measured: say how to get the
    // GPU section back from it. Other tools (Nsight Compute replays kernels) have no such path.
    const std::string path = tool;
    const char* session = config.getenv("NSYS_PROFILING_SESSION_ID");
    const bool nsys = (session && *session) || path.find("ToolsInjection") != std::string::npos ||
                      path.find("nsight-systems") != std::string::npos;
    refuse(CuptiState::Busy,
           nsys ? "Nsight Systems is profiling this process (CUDA_INJECTION64_PATH=" + path +
                      "), so fathom leaves CUPTI to it and this report has no GPU section; the "
                      "capture has it: `nsys export --type sqlite --output RUN.sqlite "
                      "REPORT.nsys-rep`, then `fathom analyze RUN.sqlite`"
                : "another CUDA tool is attached (CUDA_INJECTION64_PATH=" + path +
                      "; Nsight Compute sets it): fathom leaves CUPTI to it");
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
    if (api.get_thread_id_type(&t) == CUPTI_SUCCESS)
      collector::set_thread_id_type(static_cast<int>(t));
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
  seen_client.store(nullptr);
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
      // Kinds left on while fathom stood aside are in the list already.
      if (std::find(enabled.begin(), enabled.end(), k.kind) == enabled.end())
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
      if (std::find(enabled.begin(), enabled.end(), k) == enabled.end()) enabled.push_back(k);
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
  collector::set_external_api(&api);
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

void CuptiCollector::Impl::fail(std::string why) {
  // A profile collecting now shares the kinds: they stay as they are (issue 23, 4a).
  if (state.load() == CuptiState::Collecting && !active_client()) disable_all();
  collector::set_external_api(nullptr);
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
    c.collect_completed(touch);
    // The epoch end's forced flush follows a device synchronization: what is still owed then
    // was never launched under fathom's ids, or was lost (counted by CUPTI).
    c.deliver(force && touch && r == CUPTI_SUCCESS);
    if (r != CUPTI_SUCCESS && c.state.load() == CuptiState::Collecting) {
      c.fail("cuptiActivityFlushAll: " + cupti::result_text(c.api, r));
      return;
    }
    c.check_ownership(force);
  } catch (...) {
    detail::swallowed("collect/cupti/cupti_collector.cpp");
  }
}

void CuptiCollector::check_clients() noexcept {
  Impl& c = *impl_;
  if (c.state.load(std::memory_order_relaxed) != CuptiState::Collecting) return;
  try {
    if (const KnownClient* k = c.active_client()) c.stand_aside(Impl::Aside::KnownClient, k->name);
  } catch (...) {
    detail::swallowed("collect/cupti/cupti_collector.cpp");
  }
}

void CuptiCollector::notice_clients() noexcept {
  Impl& c = *impl_;
  if (c.state.load(std::memory_order_relaxed) != CuptiState::Collecting ||
      c.seen_client.load(std::memory_order_relaxed))
    return;
  try {
    if (const KnownClient* k = c.active_client()) {
      // Its records must carry no id of fathom's from here. On the training thread fathom stands
      // aside now, so its buffers leave CUPTI before the profile's GPU work fills them; an op on
      // another thread (autograd's) leaves that to the training thread's step end.
      if (std::this_thread::get_id() == c.home) {
        c.stand_aside(Impl::Aside::KnownClient, k->name);
      } else {
        c.seen_client.store(k);
        collector::set_external_api(nullptr);
      }
      collector::withdraw_external_ids();
    }
  } catch (...) {
    detail::swallowed("collect/cupti/cupti_collector.cpp");
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
    detail::swallowed("collect/cupti/cupti_collector.cpp");
  }
}

void CuptiCollector::stop() noexcept {
  Impl& c = *impl_;
  CuptiState s = c.state.load();
  if (s != CuptiState::Collecting && s != CuptiState::StandingAside) return;
  // A profile that started since the last phase asked (the session ending inside it) shares the
  // kinds fathom enabled: switching them off would cut its kernels and launches from here
  // (issue 23, 4a). fathom stands aside as at any takeover, and stops from there.
  if (s == CuptiState::Collecting) {
    try {
      if (const KnownClient* k = c.active_client()) {
        c.stand_aside(Impl::Aside::KnownClient, k->name);
        s = c.state.load();
      }
    } catch (...) {
      detail::swallowed("collect/cupti/cupti_collector.cpp");
    }
  }
  c.state.store(CuptiState::Stopped);
  collector::set_external_api(nullptr);
  try {
    if (s == CuptiState::Collecting) {
      // The last records are converted with the fit refined up to now, as at every flush: a
      // session ending after a long step without one would place them with the rate of the
      // step's start.
      c.clock.add(c.sample());
      c.disable_all();
      FATHOM_CUPTI(c.api, activity_flush_all, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
    // Standing aside: CUPTI is another client's; its kinds and buffers stay as they are.
    c.collect_completed(s == CuptiState::Collecting);
    if (c.owner) cupti::BufferRegistry::get().disarm(c.owner.get());
    c.deliver();
  } catch (...) {
    detail::swallowed("collect/cupti/cupti_collector.cpp");
  }
}

std::int64_t CuptiCollector::dropped_records() const noexcept { return impl_->dropped.load(); }

std::vector<Unmeasured> CuptiCollector::not_measured() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->notes;
}

}  // namespace fathom
