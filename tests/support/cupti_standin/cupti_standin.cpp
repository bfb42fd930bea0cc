// A stand-in for libcupti with CUPTI's own rules, for tests on machines without a GPU. One file
// (over 500 lines) on purpose: every exported CUPTI function, the simulated process and the
// control table share one state under one lock, CUPTI's internal one, and nothing else links it.
//
// What it follows, and where each rule comes from (CUDA 13.0's cupti_activity.h and
// cupti_callbacks.h unless said otherwise):
// - One subscriber at a time: cuptiSubscribe answers MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED while
//   one is held or a tool owns CUPTI (Nsight); cuptiSubscribe_v2 names the holder.
// - The activity API needs no subscription; one pair of buffer callbacks per process, replaced by
//   the next cuptiActivityRegisterCallbacks, and every buffer (old ones included) goes back
//   through the pair registered when it completes.
// - Host-side records (API calls, external correlation, synchronization) go to a global queue,
//   GPU records (kernels, copies, memsets) to a queue per stream, as the completion callback's
//   (context, streamId) arguments and the old per-queue API say. A GPU record is reserved when
//   the work is issued and is incomplete until the work has run.
// - cuptiActivityFlushAll(0) returns the buffers whose records are all complete (full or not);
//   the forced flush returns every buffer: a record of work not yet started comes back with an
//   invalid kind (cuptiActivityGetNextRecord then answers CUPTI_ERROR_INVALID_KIND) and work
//   still running with end == 0.
// - Full buffers go back on CUPTI's own worker thread; requests are made on the thread whose
//   API call needs the space, under CUPTI's internal lock; completions run without it;
//   cuptiActivityGetNumDroppedRecords and the other entry points take it (the lock order that
//   deadlocked Kineto, pytorch/kineto PR 1347).
// - A declined request drops the records that needed it; the count per queue is read and reset
//   by cuptiActivityGetNumDroppedRecords.
// - cuptiActivityEnable(RUNTIME/DRIVER) records every API of the domain and overrides earlier
//   cuptiActivityEnableRuntimeApi/DriverApi calls; those enable or disable single cbids.
// - A timestamp callback (cuptiActivityRegisterTimestampCallback) becomes the unit of every
//   timestamp; cuptiGetTimestamp follows it. Records' times are converted by a line: its rate
//   from the first tight reading (bracketed by host clock reads at most 100 ns apart) to the
//   latest, placed at the latest tight reading. GPU records wait for a line at least 250 us long
//   (its rate off by at most 4e-4, on a loaded machine too). A record's start and end go through
//   one line: re-anchoring between them (at the reading each conversion used to take) moved them
//   by a reading's noise, bending short durations by tens of percent (issue 23's TSC replay
//   failed in half the runs on a loaded host).
// - Thread ids are pthread_self() truncated to 32 bits by default, gettid() with
//   CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM.
// - External correlation: a stack per thread and kind; a recorded API call on a thread gets one
//   EXTERNAL_CORRELATION record per kind with a pushed id, before its own record (an assumption:
//   the headers do not say whether unrecorded calls get them; here they do not).
// - CUDA 13 records event and stream queries as SYNCHRONIZATION records
//   (cuptiActivityEnableAllSyncRecords(0) leaves out the ones not yet ready).
#include <cupti.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cupti_record_sizes.h"
#include "standin.h"

#define STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace fathom::standin {
namespace {

// The cbid names, generated from CUDA's cupti_*_cbid.h at build time.
struct CbidName {
  std::uint32_t cbid;
  const char* name;
};
constexpr CbidName kRuntimeNames[] = {
#include "runtime_cbid_names.inc"
};
constexpr CbidName kDriverNames[] = {
#include "driver_cbid_names.inc"
};

const char* cbid_name(CUpti_CallbackDomain domain, std::uint32_t cbid) {
  auto find = [cbid](const auto& table) -> const char* {
    for (const CbidName& n : table)
      if (n.cbid == cbid) return n.name;
    return nullptr;
  };
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return find(kRuntimeNames);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) return find(kDriverNames);
  return nullptr;
}

std::int64_t host_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// MARKER is not a kind the stand-in writes.
std::size_t record_size(std::uint32_t kind) {
  return kind == CUPTI_ACTIVITY_KIND_MARKER ? 0 : testing::cupti_record_size(kind);
}

bool supported_kind(CUpti_ActivityKind k) {
  return record_size(k) != 0 || k == CUPTI_ACTIVITY_KIND_OVERHEAD;
}

CUcontext kContext = reinterpret_cast<CUcontext>(0x1);

struct Buffer {
  std::uint8_t* data = nullptr;
  std::size_t size = 0;
  std::size_t used = 0;
  std::size_t records = 0;
  int incomplete = 0;  // GPU records whose work has not run yet
  CUcontext context = nullptr;
  std::uint32_t stream = 0;
};

struct Queue {
  CUcontext context = nullptr;
  std::uint32_t stream = 0;
  Buffer* current = nullptr;
  std::deque<Buffer*> full;  // handed back once complete
  std::uint64_t dropped = 0;
};

struct GpuWork {
  Buffer* buffer = nullptr;  // null: not recorded (kind disabled or dropped)
  std::size_t offset = 0;
  std::uint32_t kind = 0;
  std::int64_t start = 0, end = 0;  // host ns
};

struct Sample {
  std::int64_t host;
  std::uint64_t ts;
};

// Host time onto a timestamp callback's unit (see the rules above).
struct TimestampLine {
  Sample origin{}, anchor{};
  double per_ns = 1.0;
};

struct State {
  std::recursive_timed_mutex lock;  // CUPTI's internal lock

  std::string injected_tool;
  bool subscribed = false;
  std::string subscriber_name;  // "CUPTI for X" (v2), empty for cuptiSubscribe
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  CUpti_TimestampCallbackFunc timestamp_callback = nullptr;
  TimestampLine line;  // of the timestamp callback, for GPU records
  std::int64_t realtime_offset = 0;
  std::set<std::uint32_t> kinds;
  bool runtime_all = false, driver_all = false;
  std::map<std::uint32_t, bool> runtime_override, driver_override;
  bool all_sync_records = true;
  CUpti_ActivityThreadIdType thread_id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
  std::map<std::thread::id, std::map<CUpti_ExternalCorrelationKind, std::vector<std::uint64_t>>>
      stacks;

  Queue global;
  std::map<std::uint32_t, Queue> streams;
  std::vector<Buffer*> spares;  // requested by the race probe, not yet used
  std::list<GpuWork> work;      // issued, not yet complete
  std::map<std::uint32_t, std::int64_t> stream_free_at;
  bool gpu_paused = false;
  // A replayed run's host clock (set_replay_time): GPU work is done once it has passed the
  // work's end. 0: the real clock.
  std::int64_t replay_now = 0;
  std::uint32_t next_correlation = 1;
  std::size_t record_limit = 0;
  std::deque<std::string> names;       // kernel names, stable addresses
  std::set<std::string> shared_names;  // a recorded run's kernel names, one string a name
  Stats stats;

  bool race_probe = false;
  int race_timeout_ms = 1000;
  std::map<std::string, CUptiResult> injected;  // entry point -> forced answer
  std::map<std::uint32_t, CUptiResult> enable_results;

  // The worker thread that hands full, complete buffers back.
  std::thread worker;
  std::condition_variable_any worker_wake;
  bool worker_stop = false;
};

State& S() {
  static State* s = [] {
    auto* st = new State();  // never destroyed: CUPTI outlives every client
    st->realtime_offset = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count() -
                          host_ns();
    return st;
  }();
  return *s;
}

// The time GPU work is judged done by (under the lock).
std::int64_t gpu_now() { return S().replay_now ? S().replay_now : host_ns(); }

thread_local bool t_in_completion = false;
thread_local bool t_probe_fired = false;

// Takes CUPTI's lock for one entry point. Within a completion callback with the race probe on,
// first makes another thread request a buffer under the lock, as CUPTI's worker may at any
// time; a client whose request callback waits for a lock it holds here then deadlocks: the
// timed wait sees it, counts it and the call fails with CUPTI_ERROR_UNKNOWN instead of hanging.
class EntryLock {
 public:
  EntryLock();
  ~EntryLock() {
    if (locked_) S().lock.unlock();
  }
  bool ok() const { return locked_; }

 private:
  bool locked_ = false;
};

std::vector<std::thread> g_probes;  // joined when the completion callback returns
std::mutex g_probes_mutex;

Buffer* request_buffer(Queue& q);  // under the lock

EntryLock::EntryLock() {
  State& s = S();
  if (t_in_completion && s.race_probe && !t_probe_fired) {
    t_probe_fired = true;
    std::atomic<bool> inside{false};
    std::thread probe([&inside] {
      State& st = S();
      std::lock_guard lock(st.lock);
      inside.store(true);
      ++st.stats.race_probes;
      if (Buffer* b = request_buffer(st.global)) st.spares.push_back(b);
    });
    // The probe holds CUPTI's lock from here until the client's request callback returns.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (!inside.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    std::lock_guard g(g_probes_mutex);
    g_probes.push_back(std::move(probe));
  }
  // A timed wait by polling try_lock(): libstdc++'s try_lock_for uses pthread_mutex_clocklock,
  // which ThreadSanitizer (clang 14) does not see, so every unlock after it read as a bug.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(s.race_probe ? s.race_timeout_ms : 30000);
  while (!(locked_ = s.lock.try_lock()) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  if (!locked_) {
    // Counted without the lock: the one field written that way.
    __atomic_add_fetch(&s.stats.lock_order_violations, 1, __ATOMIC_RELAXED);
  }
}

std::uint32_t thread_id_now() {
  return S().thread_id_type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM
             ? static_cast<std::uint32_t>(::syscall(SYS_gettid))
             : static_cast<std::uint32_t>(pthread_self());
}

// A reading of the callback between two host clock reads no more than kTightNs apart, so its
// host time (their middle) is off by at most half that: a reading whose thread was preempted
// between the clocks (milliseconds on a loaded machine) is no point of the line.
constexpr std::int64_t kTightNs = 100;
struct Reading {
  Sample at;
  bool tight;
};
Reading read_callback(CUpti_TimestampCallbackFunc f) {
  const std::int64_t before = host_ns();
  const std::uint64_t t = f();
  const std::int64_t after = host_ns();
  return {{before + (after - before) / 2, t}, after - before <= kTightNs};
}

// A tight reading, retried for (the tightest of many if none is).
Sample tight_reading(CUpti_TimestampCallbackFunc f) {
  Reading best = read_callback(f);
  for (int i = 0; i < 10'000 && !best.tight; ++i) best = read_callback(f);
  return best.at;
}

// The line's rate between its origin and a later tight reading.
void refit(TimestampLine& l, Sample s) {
  if (s.host <= l.origin.host) return;
  l.anchor = s;
  l.per_ns = static_cast<double>(static_cast<std::int64_t>(s.ts - l.origin.ts)) /
             static_cast<double>(s.host - l.origin.host);
}

// GPU timestamps are converted on a line at least kLineBaselineNs long, so its rate is off by at
// most kTightNs / kLineBaselineNs (4e-4), 5 times under what the replay test allows. Waited for
// at the first GPU record converted within that long of the registration, not at the
// registration itself, and kept short: a registration that took 1 ms let work that a takeover
// test expects still running finish before it.
constexpr std::int64_t kLineBaselineNs = 250'000;
void lengthen_line(TimestampLine& l, CUpti_TimestampCallbackFunc f) {
  while (l.anchor.host - l.origin.host < kLineBaselineNs) refit(l, tight_reading(f));
}

// A timestamp now, in the unit records carry; a tight reading moves the line there.
std::uint64_t ts_now() {
  State& s = S();
  if (!s.timestamp_callback) return static_cast<std::uint64_t>(host_ns() + s.realtime_offset);
  const Reading r = read_callback(s.timestamp_callback);
  if (r.tight) refit(s.line, r.at);
  return r.at.ts;
}

// A host time (ns) in the unit records carry, on the line as it is: a record's start and end on
// one line. gpu: a GPU record's, on a line long enough.
std::uint64_t ts_of(std::int64_t h, bool gpu = false) {
  State& s = S();
  if (!s.timestamp_callback) return static_cast<std::uint64_t>(h + s.realtime_offset);
  if (gpu) lengthen_line(s.line, s.timestamp_callback);
  const TimestampLine& l = s.line;
  return l.anchor.ts + static_cast<std::uint64_t>(
                           std::llround(l.per_ns * static_cast<double>(h - l.anchor.host)));
}

void wake_worker();

// A forced answer for this entry point, if a test set one (under the lock).
std::optional<CUptiResult> injected(const char* fn) {
  auto it = S().injected.find(fn);
  if (it == S().injected.end() || it->second == CUPTI_SUCCESS) return std::nullopt;
  return it->second;
}

Buffer* request_buffer(Queue& q) {
  State& s = S();
  ++s.stats.buffers_requested;
  if (!s.request) return nullptr;
  std::uint8_t* data = nullptr;
  std::size_t size = 0, max_records = 0;
  s.request(&data, &size, &max_records);
  if (!data || size == 0) return nullptr;
  if (reinterpret_cast<std::uintptr_t>(data) % 8 != 0 || malloc_usable_size(data) < size)
    ++s.stats.undersized_buffers;
  auto* b = new Buffer{data, size, 0, 0, 0, q.context, q.stream};
  return b;
}

// Space for one record of kind in q; nullptr (and the record counted dropped) when the client
// declines the buffer it would need.
std::uint8_t* reserve(Queue& q, std::uint32_t kind, Buffer** where, std::size_t* offset) {
  State& s = S();
  const std::size_t size = record_size(kind);
  Buffer* b = q.current;
  if (b && (b->used + size > b->size || (s.record_limit && b->records >= s.record_limit))) {
    q.full.push_back(b);
    q.current = b = nullptr;
    wake_worker();
  }
  if (!b) {
    if (!s.spares.empty() && &q == &s.global) {
      b = s.spares.back();
      s.spares.pop_back();
    } else {
      b = request_buffer(q);
    }
    if (!b || b->size < size) {
      ++q.dropped;
      ++s.stats.records_dropped;
      if (b) q.full.push_back(b);  // too small to use: handed back empty
      return nullptr;
    }
    b->context = q.context;
    b->stream = q.stream;
    q.current = b;
  }
  std::uint8_t* at = b->data + b->used;
  std::memset(at, 0, size);
  std::memcpy(at, &kind, sizeof(kind));
  *where = b;
  *offset = b->used;
  b->used += size;
  ++b->records;
  ++s.stats.records_emitted;
  return at;
}

template <typename R>
R* emit(Queue& q, CUpti_ActivityKind kind, Buffer** where = nullptr,
        std::size_t* offset = nullptr) {
  Buffer* b = nullptr;
  std::size_t off = 0;
  auto* at = reserve(q, kind, &b, &off);
  if (where) *where = at ? b : nullptr;
  if (offset) *offset = off;
  return reinterpret_cast<R*>(at);
}

Queue& stream_queue(std::uint32_t stream) {
  State& s = S();
  Queue& q = s.streams[stream];
  q.context = kContext;
  q.stream = stream;
  return q;
}

bool cbid_enabled(CUpti_CallbackDomain domain, std::uint32_t cbid) {
  State& s = S();
  const auto& overrides =
      domain == CUPTI_CB_DOMAIN_RUNTIME_API ? s.runtime_override : s.driver_override;
  auto it = overrides.find(cbid);
  if (it != overrides.end()) return it->second;
  return domain == CUPTI_CB_DOMAIN_RUNTIME_API ? s.runtime_all : s.driver_all;
}

// One API call on this thread: its external correlation records and its own record when the
// cbid is recorded. Returns the correlation id. thread: a recorded call's thread id (else this
// thread's).
std::uint32_t api_record(CUpti_CallbackDomain domain, std::uint32_t cbid, std::int64_t start,
                         std::int64_t end, std::uint32_t correlation = 0,
                         std::optional<std::uint32_t> thread = std::nullopt) {
  State& s = S();
  if (correlation == 0) correlation = s.next_correlation++;
  if (!cbid_enabled(domain, cbid)) return correlation;
  if (s.kinds.count(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
    auto t = s.stacks.find(std::this_thread::get_id());
    if (t != s.stacks.end()) {
      for (const auto& [kind, ids] : t->second) {
        if (ids.empty()) continue;
        auto* e = emit<CUpti_ActivityExternalCorrelation>(s.global,
                                                          CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
        if (!e) continue;
        ++s.stats.correlation_records;
        e->externalKind = kind;
        e->externalId = ids.back();
        e->correlationId = correlation;
      }
    }
  }
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  auto* a = emit<CUpti_ActivityAPI>(
      s.global, runtime ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER);
  if (!a) return correlation;
  ++(runtime ? s.stats.runtime_records : s.stats.driver_records);
  a->cbid = cbid;
  ts_now();  // CUPTI reads the time at the call: the line is placed there
  a->start = ts_of(start);
  a->end = ts_of(end);
  a->processId = static_cast<std::uint32_t>(::getpid());
  a->threadId = thread ? *thread : thread_id_now();
  a->correlationId = correlation;
  return correlation;
}

// The runtime's own driver calls underneath one runtime call: what recording every driver API
// costs (kineto turns the worst of these off one by one).
void inner_driver_noise(std::int64_t start, std::int64_t end) {
  api_record(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, start, end);
}

// Completes the GPU work that has run by now: patches its records' timestamps.
void advance() {
  State& s = S();
  if (s.gpu_paused) return;
  const std::int64_t now = gpu_now();
  for (auto it = s.work.begin(); it != s.work.end();) {
    if (it->end > now) {
      ++it;
      continue;
    }
    if (Buffer* b = it->buffer) {
      std::uint8_t* r = b->data + it->offset;
      const std::uint64_t start = ts_of(it->start, true), end = ts_of(it->end, true);
      // Each GPU record struct has its own layout: patch through the right one.
      if (it->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
          it->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(r);
        k->start = start;
        k->end = end;
      } else if (it->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(r);
        m->start = start;
        m->end = end;
      } else if (it->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(r);
        m->start = start;
        m->end = end;
      }
      --b->incomplete;
    }
    it = s.work.erase(it);
  }
}

struct Delivery {
  Buffer* buffer;
  CUpti_BuffersCallbackCompleteFunc complete;
};

// Buffers to hand back (under the lock): the full ones that are complete, or with force every
// buffer (marking what has not finished), or with flush the current ones that are complete.
std::vector<Delivery> take_deliveries(bool flush, bool force) {
  State& s = S();
  advance();
  std::vector<Delivery> out;
  const std::int64_t now = gpu_now();
  if (force) {
    for (auto it = s.work.begin(); it != s.work.end();) {
      if (Buffer* b = it->buffer) {
        std::uint8_t* r = b->data + it->offset;
        if (!s.gpu_paused && it->start <= now) {
          // Running: CUPTI has its start, not its end.
          ++s.stats.in_flight_at_forced_flush;
          if (it->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            reinterpret_cast<CUpti_ActivityKernel10*>(r)->start = ts_of(it->start, true);
        } else {
          ++s.stats.incomplete_at_forced_flush;
          const std::uint32_t invalid = CUPTI_ACTIVITY_KIND_INVALID;
          std::memcpy(r, &invalid, sizeof(invalid));
        }
        --b->incomplete;
        it->buffer = nullptr;  // the client owns the buffer now; the work still occupies the GPU
      }
      ++it;
    }
  }
  auto visit = [&](Queue& q) {
    for (auto it = q.full.begin(); it != q.full.end();) {
      if (force || (*it)->incomplete == 0) {
        out.push_back({*it, s.complete});
        it = q.full.erase(it);
      } else {
        ++it;
      }
    }
    if (q.current && (force || (flush && q.current->incomplete == 0 && q.current->used > 0))) {
      out.push_back({q.current, s.complete});
      q.current = nullptr;
    }
  };
  visit(s.global);
  for (auto& [id, q] : s.streams) visit(q);
  if (force) {
    for (Buffer* b : s.spares) out.push_back({b, s.complete});
    s.spares.clear();
  }
  return out;
}

// Without the lock: completion callbacks may call back into CUPTI.
void deliver(std::vector<Delivery>& ds) {
  for (Delivery& d : ds) {
    {
      std::lock_guard lock(S().lock);
      ++S().stats.buffers_completed;
    }
    if (d.complete) {
      t_in_completion = true;
      t_probe_fired = false;
      d.complete(d.buffer->context, d.buffer->stream, d.buffer->data, d.buffer->size,
                 d.buffer->used);
      t_in_completion = false;
    }
    std::vector<std::thread> probes;
    {
      std::lock_guard g(g_probes_mutex);
      probes.swap(g_probes);
    }
    for (std::thread& p : probes) p.join();
    delete d.buffer;
  }
}

void worker_loop() {
  State& s = S();
  for (;;) {
    std::vector<Delivery> ds;
    {
      std::unique_lock lock(s.lock);
      s.worker_wake.wait_for(lock, std::chrono::milliseconds(2));
      if (s.worker_stop) return;
      ds = take_deliveries(/*flush=*/false, /*force=*/false);
    }
    deliver(ds);
  }
}

void wake_worker() {
  State& s = S();
  if (!s.worker.joinable()) {
    s.worker_stop = false;
    s.worker = std::thread(worker_loop);
  }
  s.worker_wake.notify_all();
}

void stop_worker() {
  State& s = S();
  {
    std::lock_guard lock(s.lock);
    s.worker_stop = true;
  }
  s.worker_wake.notify_all();
  if (s.worker.joinable()) s.worker.join();
  s.worker_stop = false;
}

std::uint32_t issue_gpu(std::uint32_t kind, std::uint32_t stream, std::int64_t after,
                        std::int64_t duration, Buffer* buffer, std::size_t offset) {
  State& s = S();
  std::int64_t& free_at = s.stream_free_at[stream];
  GpuWork w;
  w.kind = kind;
  w.start = std::max(after + 2000, free_at);
  w.end = w.start + std::max<std::int64_t>(duration, 1);
  free_at = w.end;
  w.buffer = buffer;
  w.offset = offset;
  if (buffer) ++buffer->incomplete;
  s.work.push_back(w);
  return 0;
}

// GPU work at recorded times (host ns): the stream is busy until its end whatever came before.
void issue_recorded(std::uint32_t kind, std::uint32_t stream, std::int64_t start, std::int64_t end,
                    Buffer* buffer, std::size_t offset) {
  State& s = S();
  std::int64_t& free_at = s.stream_free_at[stream];
  GpuWork w;
  w.kind = kind;
  w.start = start;
  w.end = std::max(end, start);
  free_at = std::max(free_at, w.end);
  w.buffer = buffer;
  w.offset = offset;
  if (buffer) ++buffer->incomplete;
  s.work.push_back(w);
}

// --- control functions ----------------------------------------------------------------------

void c_reset() {
  stop_worker();
  std::vector<Delivery> ds;
  {
    std::lock_guard lock(S().lock);
    ds = take_deliveries(true, true);
  }
  deliver(ds);  // what a previous test left with CUPTI goes back to its callbacks
  State& s = S();
  std::lock_guard lock(s.lock);
  s.injected_tool.clear();
  s.subscribed = false;
  s.subscriber_name.clear();
  s.request = nullptr;
  s.complete = nullptr;
  s.timestamp_callback = nullptr;
  s.line = TimestampLine{};
  s.kinds.clear();
  s.runtime_all = s.driver_all = false;
  s.runtime_override.clear();
  s.driver_override.clear();
  s.all_sync_records = true;
  s.thread_id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
  s.stacks.clear();
  s.global = Queue{};
  s.streams.clear();
  s.work.clear();
  s.stream_free_at.clear();
  s.gpu_paused = false;
  s.replay_now = 0;
  s.next_correlation = 1;
  s.record_limit = 0;
  s.stats = Stats{};
  s.race_probe = false;
  s.race_timeout_ms = 1000;
  s.injected.clear();
  s.enable_results.clear();
  s.realtime_offset = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count() -
                      host_ns();
}

void c_set_injected_tool(const char* name) {
  std::lock_guard lock(S().lock);
  S().injected_tool = name ? name : "";
}

Stats c_stats() {
  std::lock_guard lock(S().lock);
  Stats st = S().stats;
  st.subscribers = S().subscribed ? 1 : 0;
  return st;
}

bool c_kind_enabled(CUpti_ActivityKind k) {
  std::lock_guard lock(S().lock);
  return S().kinds.count(k) != 0;
}
bool c_runtime_cbid_enabled(std::uint32_t cbid) {
  std::lock_guard lock(S().lock);
  return cbid_enabled(CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
}
bool c_driver_cbid_enabled(std::uint32_t cbid) {
  std::lock_guard lock(S().lock);
  return cbid_enabled(CUPTI_CB_DOMAIN_DRIVER_API, cbid);
}
int c_enabled_kind_count() {
  std::lock_guard lock(S().lock);
  return static_cast<int>(S().kinds.size());
}
int c_enabled_cbid_count() {
  std::lock_guard lock(S().lock);
  int n = 0;
  for (std::uint32_t c = 1; c < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++c)
    n += cbid_enabled(CUPTI_CB_DOMAIN_RUNTIME_API, c);
  for (std::uint32_t c = 1; c < CUPTI_DRIVER_TRACE_CBID_SIZE; ++c)
    n += cbid_enabled(CUPTI_CB_DOMAIN_DRIVER_API, c);
  return n;
}

std::uint32_t c_runtime_call(std::uint32_t cbid) {
  std::lock_guard lock(S().lock);
  const std::int64_t start = host_ns();
  const std::uint32_t id = api_record(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, start, start + 300);
  inner_driver_noise(start + 50, start + 100);
  return id;
}

std::uint32_t c_driver_call(std::uint32_t cbid) {
  std::lock_guard lock(S().lock);
  const std::int64_t start = host_ns();
  return api_record(CUPTI_CB_DOMAIN_DRIVER_API, cbid, start, start + 200);
}

std::uint32_t c_launch_kernel(const char* name, std::uint32_t stream, std::int64_t duration,
                              bool via_driver) {
  State& s = S();
  std::lock_guard lock(s.lock);
  const std::int64_t start = host_ns();
  const std::int64_t end = start + 2000;
  std::uint32_t id;
  if (via_driver) {
    id = api_record(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, start, end);
  } else {
    id = api_record(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                    start, end);
    // The driver launch underneath shares the runtime call's correlation id.
    api_record(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, start + 500,
               end - 500, id);
    api_record(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute,
               start + 100, start + 200);
  }
  Buffer* b = nullptr;
  std::size_t offset = 0;
  CUpti_ActivityKernel10* k = nullptr;
  if (s.kinds.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ||
      s.kinds.count(CUPTI_ACTIVITY_KIND_KERNEL)) {
    k = emit<CUpti_ActivityKernel10>(stream_queue(stream), CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                     &b, &offset);
  }
  if (k) {
    ++s.stats.gpu_records;
    s.names.emplace_back(name ? name : "");
    k->name = s.names.back().c_str();
    k->deviceId = 0;
    k->contextId = 1;
    k->streamId = stream;
    k->correlationId = id;
    k->gridX = 128;
    k->gridY = k->gridZ = 1;
    k->blockX = 256;
    k->blockY = k->blockZ = 1;
  }
  issue_gpu(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, stream, end, duration, k ? b : nullptr, offset);
  return id;
}

std::uint32_t c_memcpy(std::uint8_t copy_kind, std::uint8_t src, std::uint8_t dst,
                       std::uint64_t bytes, std::uint32_t stream, std::int64_t duration,
                       bool async) {
  State& s = S();
  std::unique_lock lock(s.lock);
  const std::int64_t start = host_ns();
  const std::uint32_t cbid = async ? CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020
                                   : CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020;
  const std::uint32_t id = s.next_correlation++;
  Buffer* b = nullptr;
  std::size_t offset = 0;
  CUpti_ActivityMemcpy6* m = nullptr;
  if (s.kinds.count(CUPTI_ACTIVITY_KIND_MEMCPY))
    m = emit<CUpti_ActivityMemcpy6>(stream_queue(stream), CUPTI_ACTIVITY_KIND_MEMCPY, &b, &offset);
  if (m) {
    ++s.stats.gpu_records;
    m->copyKind = copy_kind;
    m->srcKind = src;
    m->dstKind = dst;
    m->bytes = bytes;
    m->flags = async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
    m->deviceId = 0;
    m->contextId = 1;
    m->streamId = stream;
    m->correlationId = id;
    m->runtimeCorrelationId = id;
  }
  issue_gpu(CUPTI_ACTIVITY_KIND_MEMCPY, stream, start + 1000, duration, m ? b : nullptr, offset);
  std::int64_t end = start + 1500;
  if (!async) {
    // A synchronous copy returns when it is done.
    const std::int64_t done = s.stream_free_at[stream];
    lock.unlock();
    while (host_ns() < done) std::this_thread::sleep_for(std::chrono::microseconds(20));
    lock.lock();
    end = host_ns();
  }
  api_record(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, start, end, id);
  return id;
}

// A cbid's name without CUPTI's version suffix ("_v7000"), as fathom displays it.
std::string_view unversioned(std::string_view n) {
  const std::size_t v = n.rfind("_v");
  if (v == std::string_view::npos || v + 2 == n.size()) return n;
  for (std::size_t i = v + 2; i < n.size(); ++i)
    if (n[i] < '0' || n[i] > '9') return n;
  return n.substr(0, v);
}

std::uint32_t c_cbid_of(CUpti_CallbackDomain domain, const char* name) {
  if (!name) return 0;
  const std::string_view want(name);
  auto find = [&](const auto& table) -> std::uint32_t {
    for (const CbidName& n : table)
      if (want == n.name) return n.cbid;
    for (const CbidName& n : table)
      if (unversioned(want) == unversioned(n.name)) return n.cbid;
    return 0;
  };
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return find(kRuntimeNames);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) return find(kDriverNames);
  return 0;
}

void c_replay_call(const RecordedCall& call, const RecordedGpu* gpu, std::size_t n) {
  State& s = S();
  std::lock_guard lock(s.lock);
  // The stand-in's own calls take ids above the recording's.
  s.next_correlation = std::max(s.next_correlation, call.correlation_id + 1);
  api_record(call.domain, call.cbid, call.start_ns, call.end_ns, call.correlation_id,
             call.thread_id);
  for (std::size_t i = 0; i < n; ++i) {
    const RecordedGpu& g = gpu[i];
    Buffer* b = nullptr;
    std::size_t offset = 0;
    void* record = nullptr;
    std::uint32_t kind = g.kind;
    if (g.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || g.kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      if (s.kinds.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ||
          s.kinds.count(CUPTI_ACTIVITY_KIND_KERNEL)) {
        if (auto* k = emit<CUpti_ActivityKernel10>(
                stream_queue(g.stream), CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, &b, &offset)) {
          k->name = s.shared_names.emplace(g.name ? g.name : "").first->c_str();
          k->deviceId = g.device;
          k->contextId = 1;
          k->streamId = g.stream;
          k->correlationId = call.correlation_id;
          k->gridX = g.grid[0];
          k->gridY = g.grid[1];
          k->gridZ = g.grid[2];
          k->blockX = g.block[0];
          k->blockY = g.block[1];
          k->blockZ = g.block[2];
          record = k;
        }
      }
    } else if (g.kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      if (s.kinds.count(CUPTI_ACTIVITY_KIND_MEMCPY)) {
        if (auto* m = emit<CUpti_ActivityMemcpy6>(stream_queue(g.stream),
                                                  CUPTI_ACTIVITY_KIND_MEMCPY, &b, &offset)) {
          m->copyKind = g.copy_kind;
          m->srcKind = g.src_kind;
          m->dstKind = g.dst_kind;
          m->bytes = g.bytes;
          m->flags = g.async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
          m->deviceId = g.device;
          m->contextId = 1;
          m->streamId = g.stream;
          m->correlationId = call.correlation_id;
          m->runtimeCorrelationId =
              call.domain == CUPTI_CB_DOMAIN_RUNTIME_API ? call.correlation_id : 0;
          record = m;
        }
      }
    } else if (g.kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      if (s.kinds.count(CUPTI_ACTIVITY_KIND_MEMSET)) {
        if (auto* m = emit<CUpti_ActivityMemset4>(stream_queue(g.stream),
                                                  CUPTI_ACTIVITY_KIND_MEMSET, &b, &offset)) {
          m->bytes = g.bytes;
          m->deviceId = g.device;
          m->contextId = 1;
          m->streamId = g.stream;
          m->correlationId = call.correlation_id;
          record = m;
        }
      }
    } else {
      continue;
    }
    if (record) ++s.stats.gpu_records;
    issue_recorded(kind, g.stream, g.start_ns, g.end_ns, record ? b : nullptr, offset);
  }
}

void c_set_replay_time(std::int64_t now) {
  State& s = S();
  std::lock_guard lock(s.lock);
  s.replay_now = now ? std::max(s.replay_now, now) : 0;
}

void sync_record(CUpti_ActivitySynchronizationType type, std::uint32_t stream,
                 std::uint32_t correlation, std::int64_t start, std::int64_t end,
                 std::uint32_t result) {
  State& s = S();
  if (!s.kinds.count(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) return;
  if (result != 0 && !s.all_sync_records) return;
  auto* r = emit<CUpti_ActivitySynchronization2>(s.global, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  if (!r) return;
  ++s.stats.sync_records;
  r->type = type;
  r->start = ts_of(start);
  r->end = ts_of(end);
  r->correlationId = correlation;
  r->contextId = 1;
  r->streamId = stream;
  r->cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  r->returnValue = result;
}

std::uint32_t c_stream_synchronize(std::uint32_t stream) {
  State& s = S();
  std::unique_lock lock(s.lock);
  const std::int64_t start = host_ns();
  const std::int64_t done = s.stream_free_at[stream];
  lock.unlock();
  while (host_ns() < done) std::this_thread::sleep_for(std::chrono::microseconds(20));
  lock.lock();
  const std::int64_t end = host_ns();
  const std::uint32_t id =
      api_record(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
                 start, end);
  sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, stream, id, start, end, 0);
  return id;
}

std::uint32_t c_event_query(std::uint32_t stream) {
  State& s = S();
  std::lock_guard lock(s.lock);
  const std::int64_t start = host_ns();
  const bool busy = s.stream_free_at[stream] > start || s.gpu_paused;
  const std::uint32_t id =
      api_record(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020, start,
                 start + 200);
  sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, stream, id, start, start + 200,
              busy ? 600u /* CUDA_ERROR_NOT_READY */ : 0u);
  return id;
}

std::uint32_t c_event_record(std::uint32_t) {
  std::lock_guard lock(S().lock);
  const std::int64_t start = host_ns();
  return api_record(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
                    start, start + 150);
}

void c_pause_gpu(bool paused) {
  State& s = S();
  std::lock_guard lock(s.lock);
  if (paused && !s.gpu_paused) advance();  // what has run by now is done; the rest is held
  if (s.gpu_paused && !paused) {
    // Held work resumes now.
    const std::int64_t now = host_ns();
    for (GpuWork& w : s.work) {
      if (w.start < now) {
        const std::int64_t d = w.end - w.start;
        w.start = now;
        w.end = now + d;
      }
    }
    for (auto& [stream, free_at] : s.stream_free_at) {
      for (const GpuWork& w : s.work)
        if (w.end > free_at) free_at = w.end;
    }
  }
  s.gpu_paused = paused;
}

void c_wait_gpu() {
  std::int64_t done = 0;
  {
    std::lock_guard lock(S().lock);
    for (const auto& [stream, t] : S().stream_free_at) done = std::max(done, t);
    // A replay's host waits on its own clock.
    if (S().replay_now) {
      S().replay_now = std::max(S().replay_now, done);
      return;
    }
  }
  while (host_ns() < done) std::this_thread::sleep_for(std::chrono::microseconds(20));
}

void c_set_race_probe(bool on, int timeout_ms) {
  std::lock_guard lock(S().lock);
  S().race_probe = on;
  S().race_timeout_ms = timeout_ms;
}

void c_set_record_limit(std::size_t n) {
  std::lock_guard lock(S().lock);
  S().record_limit = n;
}

void c_set_result(const char* fn, CUptiResult r) {
  std::lock_guard lock(S().lock);
  S().injected[fn] = r;
}

void c_set_enable_result(CUpti_ActivityKind k, CUptiResult r) {
  std::lock_guard lock(S().lock);
  S().enable_results[k] = r;
}

std::uint32_t c_thread_id() {
  std::lock_guard lock(S().lock);
  return thread_id_now();
}

std::uint64_t c_timestamp() {
  std::lock_guard lock(S().lock);
  return ts_now();
}

std::size_t c_external_depth(CUpti_ExternalCorrelationKind kind) {
  std::lock_guard lock(S().lock);
  auto t = S().stacks.find(std::this_thread::get_id());
  if (t == S().stacks.end()) return 0;
  auto k = t->second.find(kind);
  return k == t->second.end() ? 0 : k->second.size();
}

}  // namespace
}  // namespace fathom::standin

using namespace fathom::standin;

// --- the CUPTI functions ------------------------------------------------------------------------

STANDIN_EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char** s) {
  if (!s) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (r) {
#define NAME(x) \
  case x:       \
    *s = #x;    \
    return CUPTI_SUCCESS;
    NAME(CUPTI_SUCCESS)
    NAME(CUPTI_ERROR_INVALID_PARAMETER)
    NAME(CUPTI_ERROR_INVALID_KIND)
    NAME(CUPTI_ERROR_MAX_LIMIT_REACHED)
    NAME(CUPTI_ERROR_NOT_INITIALIZED)
    NAME(CUPTI_ERROR_INVALID_OPERATION)
    NAME(CUPTI_ERROR_QUEUE_EMPTY)
    NAME(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    NAME(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
    NAME(CUPTI_ERROR_NOT_SUPPORTED)
    NAME(CUPTI_ERROR_UNKNOWN)
#undef NAME
    default:
      *s = "CUPTI_ERROR (stand-in: no name)";
      return CUPTI_SUCCESS;
  }
}

STANDIN_EXPORT CUptiResult cuptiGetVersion(std::uint32_t* v) {
  if (!v) return CUPTI_ERROR_INVALID_PARAMETER;
  *v = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiGetTimestamp(std::uint64_t* t) {
  if (!t) return CUPTI_ERROR_INVALID_PARAMETER;
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  *t = ts_now();
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, std::uint32_t cbid,
                                                const char** name) {
  if (!name) return CUPTI_ERROR_INVALID_PARAMETER;
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  const char* n = cbid_name(domain, cbid);
  if (!n) return CUPTI_ERROR_INVALID_PARAMETER;
  *name = n;
  return CUPTI_SUCCESS;
}

namespace {
CUptiResult subscribe(CUpti_SubscriberHandle* handle, const char* name,
                      CUpti_SubscriberParams* params) {
  if (!handle) return CUPTI_ERROR_INVALID_PARAMETER;
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  if (auto r = injected("cuptiSubscribe")) return *r;
  State& s = S();
  if (!s.injected_tool.empty() || s.subscribed) {
    if (params && params->oldSubscriberName && params->oldSubscriberSize > 0) {
      const std::string holder = !s.injected_tool.empty() ? s.injected_tool : s.subscriber_name;
      std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", holder.c_str());
    }
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  s.subscribed = true;
  s.subscriber_name = name && *name ? std::string("CUPTI for ") + name : "";
  *handle = reinterpret_cast<CUpti_SubscriberHandle>(0x5);
  return CUPTI_SUCCESS;
}
}  // namespace

STANDIN_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* handle, CUpti_CallbackFunc,
                                          void*) {
  return subscribe(handle, nullptr, nullptr);
}

STANDIN_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* handle, CUpti_CallbackFunc,
                                             void*, CUpti_SubscriberParams* params) {
  if (params && params->structSize == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  return subscribe(handle, params ? params->subscriberName : nullptr, params);
}

STANDIN_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle handle) {
  if (!handle) return CUPTI_ERROR_INVALID_PARAMETER;
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  S().subscribed = false;
  S().subscriber_name.clear();
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc request, CUpti_BuffersCallbackCompleteFunc complete) {
  if (!request || !complete) return CUPTI_ERROR_INVALID_PARAMETER;
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  if (auto r = injected("cuptiActivityRegisterCallbacks")) return *r;
  S().request = request;
  S().complete = complete;
  wake_worker();
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) {
  if (!f) return CUPTI_ERROR_INVALID_PARAMETER;
  // A first rate over 10 us (within 1 %) for host records until GPU records lengthen it.
  TimestampLine line;
  line.origin = line.anchor = tight_reading(f);
  for (Sample b = line.origin; b.host - line.origin.host < 10'000;)
    refit(line, b = tight_reading(f));
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  S().timestamp_callback = f;
  S().line = line;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  if (!supported_kind(kind)) return CUPTI_ERROR_INVALID_KIND;
  if (auto r = injected("cuptiActivityEnable")) return *r;
  if (auto it = S().enable_results.find(kind);
      it != S().enable_results.end() && it->second != CUPTI_SUCCESS)
    return it->second;
  State& s = S();
  s.kinds.insert(kind);
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
    s.runtime_all = true;
    s.runtime_override.clear();
  } else if (kind == CUPTI_ACTIVITY_KIND_DRIVER) {
    s.driver_all = true;
    s.driver_override.clear();
  }
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  if (!supported_kind(kind)) return CUPTI_ERROR_INVALID_KIND;
  State& s = S();
  s.kinds.erase(kind);
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
    s.runtime_all = false;
    s.runtime_override.clear();
  } else if (kind == CUPTI_ACTIVITY_KIND_DRIVER) {
    s.driver_all = false;
    s.driver_override.clear();
  }
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid,
                                                         std::uint8_t enable) {
  if (cbid == 0 || cbid >= CUPTI_RUNTIME_TRACE_CBID_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  S().runtime_override[cbid] = enable != 0;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid,
                                                        std::uint8_t enable) {
  if (cbid == 0 || cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  S().driver_override[cbid] = enable != 0;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityEnableAllSyncRecords(std::uint8_t enable) {
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  S().all_sync_records = enable != 0;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityFlushAll(std::uint32_t flag) {
  std::vector<Delivery> ds;
  {
    EntryLock lock;
    if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
    if (auto r = injected("cuptiActivityFlushAll")) return *r;
    if (!S().complete) return CUPTI_ERROR_INVALID_OPERATION;
    ds = take_deliveries(/*flush=*/true, (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
  }
  deliver(ds);
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityGetNextRecord(std::uint8_t* buffer, std::size_t valid,
                                                      CUpti_Activity** record) {
  // A walk over the client's own buffer: no lock (the injection map is read-mostly).
  if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
  {
    std::lock_guard lock(S().lock);
    if (auto r = injected("cuptiActivityGetNextRecord")) return *r;
  }
  std::size_t at = 0;
  if (*record) {
    const std::size_t size = record_size((*record)->kind);
    if (size == 0) return CUPTI_ERROR_INVALID_KIND;
    at = static_cast<std::size_t>(reinterpret_cast<std::uint8_t*>(*record) - buffer) + size;
  }
  if (at >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  auto* next = reinterpret_cast<CUpti_Activity*>(buffer + at);
  const std::size_t size = record_size(next->kind);
  if (size == 0 || at + size > valid) return CUPTI_ERROR_INVALID_KIND;
  *record = next;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context,
                                                             std::uint32_t stream,
                                                             std::size_t* dropped) {
  if (!dropped) return CUPTI_ERROR_INVALID_PARAMETER;
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  State& s = S();
  Queue* q = nullptr;
  if (!context) {
    q = &s.global;
  } else {
    auto it = s.streams.find(stream);
    if (it != s.streams.end()) q = &it->second;
  }
  *dropped = q ? q->dropped : 0;
  if (q) q->dropped = 0;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult
cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, std::uint64_t id) {
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID ||
      kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE)
    return CUPTI_ERROR_INVALID_PARAMETER;
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  S().stacks[std::this_thread::get_id()][kind].push_back(id);
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                                 std::uint64_t* last) {
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  auto& ids = S().stacks[std::this_thread::get_id()][kind];
  if (ids.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (last) *last = ids.back();
  ids.pop_back();
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType* type) {
  if (!type) return CUPTI_ERROR_INVALID_PARAMETER;
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  *type = S().thread_id_type;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
    return CUPTI_ERROR_NOT_SUPPORTED;
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  S().thread_id_type = type;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiFinalize() {
  EntryLock lock;
  if (!lock.ok()) return CUPTI_ERROR_UNKNOWN;
  State& s = S();
  // Everything a client set up is gone; buffers CUPTI held are not returned.
  s.subscribed = false;
  s.subscriber_name.clear();
  s.request = nullptr;
  s.complete = nullptr;
  s.timestamp_callback = nullptr;
  s.kinds.clear();
  s.runtime_all = s.driver_all = false;
  s.runtime_override.clear();
  s.driver_override.clear();
  return CUPTI_SUCCESS;
}

// --- the control table ------------------------------------------------------------------------

STANDIN_EXPORT void fathom_standin_control(Control* c) {
  c->reset = c_reset;
  c->set_injected_tool = c_set_injected_tool;
  c->stats = c_stats;
  c->kind_enabled = c_kind_enabled;
  c->runtime_cbid_enabled = c_runtime_cbid_enabled;
  c->driver_cbid_enabled = c_driver_cbid_enabled;
  c->enabled_kind_count = c_enabled_kind_count;
  c->enabled_cbid_count = c_enabled_cbid_count;
  c->runtime_call = c_runtime_call;
  c->driver_call = c_driver_call;
  c->launch_kernel = c_launch_kernel;
  c->memcpy = c_memcpy;
  c->stream_synchronize = c_stream_synchronize;
  c->event_query = c_event_query;
  c->event_record = c_event_record;
  c->cbid_of = c_cbid_of;
  c->replay_call = c_replay_call;
  c->set_replay_time = c_set_replay_time;
  c->pause_gpu = c_pause_gpu;
  c->wait_gpu = c_wait_gpu;
  c->set_race_probe = c_set_race_probe;
  c->set_record_limit_per_buffer = c_set_record_limit;
  c->set_result = c_set_result;
  c->set_enable_result = c_set_enable_result;
  c->set_thread_id_type = cuptiSetThreadIdType;
  c->thread_id = c_thread_id;
  c->timestamp = c_timestamp;
  c->external_depth = c_external_depth;
  c->register_timestamp_callback = cuptiActivityRegisterTimestampCallback;
  c->enable_runtime_api = cuptiActivityEnableRuntimeApi;
  c->enable_driver_api = cuptiActivityEnableDriverApi;
  c->finalize = cuptiFinalize;
}
