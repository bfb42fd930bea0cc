#pragma once
// The collector's state, shared by the files that make it up: cupti_collector.cpp (starting,
// arming, stopping, the public class), collector_records.cpp (buffers to batches) and
// collector_ownership.cpp (standing aside for other clients, resuming). Internal to the core.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collect/cupti/buffer_registry.h"
#include "collect/cupti/clock_alignment.h"
#include "collect/cupti/correlation_table.h"
#include "collect/cupti/cupti_api.h"
#include "collect/cupti/cupti_collector.h"

namespace fathom {

namespace collector {

// The activity kinds fathom enables, and what is lost without the optional ones. The runtime
// and driver calls are enabled one cbid at a time (api_selection.h); SYNCHRONIZATION is not
// enabled: CUDA 13 adds every event and stream query to it, and fathom reads host waits from
// the synchronizing calls themselves.
struct Kind {
  CUpti_ActivityKind kind;
  const char* name;
  const char* lost;  // nullptr: essential
  bool fathom_only;  // Kineto never enables it: disabled when fathom stands aside
  // GPU work: a profile that records none (torch.profiler's activities=[CPU]) leaves it
  // fathom's alone, disabled while fathom stands aside for that profile.
  bool gpu_work;
};
inline constexpr Kind kKinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", nullptr, false, true},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", nullptr, false, true},
    {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", nullptr, false, true},
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION", nullptr, false, false},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2", "peer-to-peer copies between GPUs (CUPTI)", true,
     true},
};

inline std::size_t record_count(const GpuActivity& a) {
  return a.kernels.size() + a.memcpys.size() + a.memsets.size() + a.syncs.size() +
         a.runtime_calls.size() + a.ops.size();
}

}  // namespace collector

struct CuptiCollector::Impl {
  enum class Aside { None, KnownClient, Displaced, Yielded };

  Impl(const cupti::Api& a, Sink s, CuptiConfig c);
  ~Impl();

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
  // Whether the client's profile running now records GPU work (unknown: taken to).
  bool records_gpu(const KnownClient& k) const noexcept;
  bool known_holder(const std::string& holder) const;
  cupti::ClockSample sample() const;
  void calibrate();
  // own_queues: CUPTI's dropped-record counts are fathom's to read (and so reset): not while
  // another client collects, whose counts they are (issue 23, 4e).
  void collect_completed(bool own_queues = true);
  // Attributes and hands the pending records to the sink. settled: after a forced flush of a
  // synchronized device, so correlations still owed never will be paid (CorrelationTable).
  void deliver(bool settled = false);
  void stand_aside(Aside reason, std::string who);
  void resume(const std::string& why, bool taken_over);
  void check_ownership(bool forced);
  void fail(std::string why);

  cupti::Api api;
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
  std::int64_t correlations_cut = 0;  // CorrelationTable::cut() already reported
  // A known client an op off the training thread saw collecting (notice_clients), for the next
  // step end to act on.
  std::atomic<const KnownClient*> seen_client{nullptr};
  // The thread that started the collector (the training thread): the one whose ops may stand
  // aside at once, as its phases and flushes do.
  std::thread::id home = std::this_thread::get_id();

  mutable std::mutex mutex;  // everything below; never held around a CUPTI call
  GpuActivity pending;
  std::size_t pending_records = 0;
  cupti::CorrelationTable table;
  std::vector<Unmeasured> notes;
  std::set<std::string> noted;
};

}  // namespace fathom
