#pragma once
// GPU activity through CUPTI's activity API: kernels, memcpys (bytes, direction, pageable /
// pinned / device, stream, async), memsets, host synchronizations, CUDA runtime calls and
// kernel launches through the driver, each attributed to the fathom op and phase that launched
// it (external correlation, as Kineto does). libcupti is loaded at run time; where it is absent,
// busy with another tool, or fails, the collector says why and the run goes on with phase timing.
//
// CUPTI belongs to one client at a time, and fathom never holds what another client needs: it
// keeps no callback subscription (torch.profiler's Kineto needs that one), stands aside while
// another client collects (a known one, such as torch.profiler, is asked; an unknown one shows
// as fathom's buffers no longer coming back), resumes when a known client is done, and the
// report says from where to where GPU data is missing and who had CUPTI.
//
// Buffers come back on CUPTI's threads and are only queued there; flush() parses them and hands
// them to the sink as one GpuActivity batch, on the calling thread. Step ends flush without
// waiting; the epoch end, once the device is synchronized, forces out everything.
#include <fathom/gpu_records.h>
#include <fathom/phase.h>
#include <fathom/unmeasured.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fathom {

namespace cupti {
struct Api;
}

enum class CuptiState {
  Collecting,
  StandingAside,  // another client has CUPTI now; fathom resumes when it is known to be done
  Unavailable,    // no libcupti, wrong version, no driver or device, no permission
  Busy,           // a tool owns CUPTI for the whole run (Nsight Systems, Nsight Compute...)
  Failed,         // CUPTI failed after collection started
  Stopped,        // stopped by stop()
};

// A CUPTI client fathom knows how to ask (torch.profiler's Kineto, from the LibTorch layer).
struct KnownClient {
  std::string name;              // "torch.profiler (Kineto)", for the report
  std::function<bool()> active;  // collecting now (a schedule's warm-up included); cheap, noexcept
  // Substrings of the subscriber name CUPTI gives for this client; an unnamed subscriber is
  // taken for it too (torch 2.11's Kineto subscribes without a name).
  std::vector<std::string> subscriber_names;
  // Whether the profile collecting now records GPU work (kernels, copies, memsets); empty: taken
  // to. A profile that does not (torch.profiler's activities=[CPU] on a CUDA machine) still takes
  // CUPTI's buffer callbacks and records runtime calls, so fathom stands aside for it too; but
  // the GPU kinds fathom enabled are then nobody's, and fathom turns them off until it resumes.
  std::function<bool()> records_gpu;
};

struct CuptiConfig {
  // 1 MiB: CUPTI keeps filling a queue's buffer after another client registered its callbacks,
  // and that client drops a buffer it did not allocate; a smaller buffer bounds what it loses.
  std::size_t buffer_bytes = std::size_t{1} << 20;
  // Buffers CUPTI may hold, plus those waiting to be parsed; beyond them CUPTI drops records
  // (counted, reported), so a loop that never flushes stays bounded (64 MiB).
  std::size_t max_buffers = 64;
  // Records held between two flushes at most; beyond them records are dropped and counted.
  std::size_t max_pending_records = std::size_t{1} << 19;
  // Step-end flushes in a row that saw traced CUDA calls on the host but no buffer come back
  // through fathom's callbacks before fathom takes it that another client took them.
  int displacement_flushes = 2;
  // Reads the environment (the signs of another CUDA tool); tests replace it.
  std::function<const char*(const char*)> getenv;
  // Clients fathom can ask whether they collect now; empty: none known.
  std::vector<KnownClient> known_clients;
  // Where the run is ("epoch 2, step 17"), for the report's "from ... to ..."; empty: not said.
  std::function<std::string()> where;
  // Waits for the device (cudaDeviceSynchronize). When fathom stands aside for a profiler that
  // just started, the wait and a forced flush empty every buffer of fathom's that CUPTI still
  // fills, so the profiler's next records go to its own buffers (CUPTI keeps filling the buffer a
  // queue has, whoever registered since). Empty: only the complete buffers are flushed.
  std::function<void()> synchronize_device;
};

class CuptiCollector {
 public:
  using Sink = std::function<void(GpuActivity&&)>;

  // Loads libcupti and starts collecting. Never throws: a collector that could not start says
  // why in state() and not_measured().
  static std::unique_ptr<CuptiCollector> start(Sink sink, CuptiConfig config = {});
  // The same with a given CUPTI (tests pass the stand-in).
  static std::unique_ptr<CuptiCollector> start(const cupti::Api& api, Sink sink,
                                               CuptiConfig config = {});
  // A collector that does not collect, when the library could not be loaded (why: what was
  // searched) or when the caller already knows another client holds CUPTI (why, verbatim).
  static std::unique_ptr<CuptiCollector> unavailable(std::string why);
  static std::unique_ptr<CuptiCollector> busy(std::string why);

  ~CuptiCollector();  // stops
  CuptiCollector(const CuptiCollector&) = delete;
  CuptiCollector& operator=(const CuptiCollector&) = delete;

  CuptiState state() const noexcept;
  bool collecting() const noexcept { return state() == CuptiState::Collecting; }
  // Collecting, or standing aside and able to resume: the op hooks stay registered.
  bool live() const noexcept;
  // The library in use ("/usr/local/cuda/lib64/libcupti.so.13"), or empty.
  std::string library() const;

  // Parses every buffer CUPTI gave back and hands the records to the sink; then checks that
  // fathom still has CUPTI (or may have it back). force=false at step ends: CUPTI returns only
  // buffers whose records are complete and nothing is waited for. force=true at the epoch end,
  // once the device is synchronized: everything is returned.
  void flush(bool force) noexcept;
  // Asks the known clients whether one collects now, and stands aside if so: at phase starts,
  // so fathom's ids stop reaching CUPTI as soon as a profiler is seen. One call per client.
  void check_clients() noexcept;
  // An eligible op starts (the op hooks call this before pushing its id): a known client seen
  // collecting here makes fathom stand aside at once on the thread that started the collector
  // (the training thread; elsewhere it stops pushing ids and the next step end stands aside), and
  // resume at the step end if the profile is over by then (one started and stopped inside a
  // phase). One call per known client while collecting.
  void notice_clients() noexcept;
  // The host made n CUDA calls that fathom records (its phase events): a step with such calls
  // and no buffer back through fathom's callbacks is how an unknown client's takeover shows.
  void note_traced_calls(std::size_t n) noexcept;
  // A host-side op with its external id (OpRecord::external_id), delivered with the next batch.
  void add_op(OpRecord op) noexcept;
  // The caller knows another client took CUPTI over: stand aside now (why goes to the report).
  void yield(std::string why) noexcept;
  // Stops collecting: disables what fathom enabled (when CUPTI is still fathom's), flushes,
  // delivers the last batch.
  void stop() noexcept;

  // Records dropped so far (CUPTI's count plus fathom's own limits and lost records).
  std::int64_t dropped_records() const noexcept;
  // What the report must list as not measured, and why: the whole of GPU activity when the
  // collector is not collecting; a part of it (a stretch of steps, peer copies) otherwise.
  // Entries appear as they happen, so a session can add the new ones after each flush.
  std::vector<Unmeasured> not_measured() const;

  struct Impl;

 private:
  explicit CuptiCollector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What the report calls CUPTI's measurements, for Unmeasured::what.
inline constexpr const char* kCuptiMeasurements =
    "GPU kernels, transfers and Tensor Core use (CUPTI)";

// External correlation: the hooks push the id of the op (OpRecord::external_id) or the phase
// around the work they launch; CUPTI then tags every CUDA call made on this thread in between.
// With no collector collecting, each is one relaxed atomic load. Never throw.
enum class ExternalIdKind : std::uint8_t { Op, Phase };
void push_external_id(ExternalIdKind kind, std::uint64_t id) noexcept;
void pop_external_id(ExternalIdKind kind) noexcept;
// True while a collector collects: the hooks skip their op bookkeeping otherwise.
bool external_ids_enabled() noexcept;
// The id to push for a phase (ExternalIdKind::Phase).
std::uint64_t phase_external_id(Phase p) noexcept;
// The thread id CUPTI writes into the records of calls made on the calling thread (by default
// pthread_self() truncated to 32 bits; the OS thread id when a client chose that type): what
// the hooks put in OpRecord::thread and AnnotationRecord::thread so host and GPU sides match.
std::uint64_t cupti_thread_id() noexcept;

}  // namespace fathom
