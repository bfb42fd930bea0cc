#pragma once
// GPU activity through CUPTI's activity API: kernels, memcpys (bytes, direction, pageable /
// pinned / device, stream, async), memsets, host synchronizations, CUDA runtime calls and
// kernel launches through the driver, each attributed to the fathom op and phase that launched
// it (external correlation, as Kineto does). libcupti is loaded at run time; where it is absent,
// busy with another tool, or fails, the collector says why and the run goes on with phase timing.
//
// Buffers complete asynchronously; flush() hands what has completed to the sink as one
// GpuActivity batch, on the calling thread. Step ends flush without waiting (nothing that is
// still running is waited for); the epoch end forces out everything.
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
  Unavailable,  // no libcupti, wrong version, no driver or device, no permission
  Busy,         // another CUPTI client (torch.profiler, Nsight Systems, another session) holds it
  Failed,       // CUPTI failed after collection started
  Stopped,      // stopped by stop() or by yielding to another client
};

struct CuptiConfig {
  std::size_t buffer_bytes = std::size_t{4} << 20;
  // Buffers CUPTI may hold at once; beyond them CUPTI drops records (counted, reported).
  std::size_t max_buffers = 32;
  // Records held between two flushes at most; beyond them records are dropped and counted
  // (a loop with no step end must not grow without bound).
  std::size_t max_pending_records = std::size_t{1} << 19;
  // Reads the environment (the signs of another CUDA tool); tests replace it.
  std::function<const char*(const char*)> getenv;
};

class CuptiCollector {
 public:
  using Sink = std::function<void(GpuActivity&&)>;

  // Loads libcupti and starts collecting. Never throws: a collector that could not start says
  // why in state() and not_measured().
  static std::unique_ptr<CuptiCollector> start(Sink sink, CuptiConfig config = {});
  // The same with a given CUPTI (tests pass a fake).
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
  // The library in use ("/usr/local/cuda/lib64/libcupti.so.13"), or empty.
  std::string library() const;

  // Hands every completed buffer to the sink. force=false at step ends: CUPTI returns only the
  // buffers whose records are complete and nothing is waited for. force=true at the epoch end,
  // once the device work of the epoch has finished: everything is returned.
  void flush(bool force) noexcept;
  // A host-side op with its external id (OpRecord::external_id), delivered with the next batch.
  void add_op(OpRecord op) noexcept;
  // Another CUPTI client took over (e.g. torch.profiler started): stop calling CUPTI at all,
  // deliver nothing more, and report why.
  void yield(std::string why) noexcept;
  // Stops collecting: disables the activity kinds, flushes, delivers the last batch.
  void stop() noexcept;

  // Records dropped so far (CUPTI's count plus fathom's own limits).
  std::int64_t dropped_records() const noexcept;
  // What the report must list as not measured, and why: the whole of GPU activity when the
  // collector is not collecting; a part of it (e.g. host synchronizations) otherwise. Entries
  // appear as they happen, so a session can add the new ones after each flush.
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

}  // namespace fathom
