#pragma once
// The test side of the CUPTI stand-in (libfathom_cupti_standin.so): a shared library that
// exports the CUPTI functions fathom loads and follows CUPTI's rules as far as tests need them
// (cupti_standin.cpp says which rules and where they come from). Tests load it with dlopen
// (never link it: its cupti* symbols must not interpose on the real libcupti torch loads) and
// reach its control functions through this struct.
//
// The stand-in simulates a process: CUDA API calls on host threads (each one a runtime or driver
// API record when enabled, with external correlation records for every pushed id), GPU work on
// streams that completes on the host clock, and CUPTI's buffer queues: one global queue for
// host-side records and one per stream for GPU records, each filled into buffers the registered
// client hands out and returned when full, or flushed, with CUPTI's completeness rules.
#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collect/cupti/cupti_api.h"

namespace fathom::standin {

// Counters the stand-in keeps; tests read them to check what a client did and received.
struct Stats {
  std::uint64_t records_emitted = 0;      // every record written into a client's buffer
  std::uint64_t runtime_records = 0;      // of which RUNTIME
  std::uint64_t driver_records = 0;       // of which DRIVER
  std::uint64_t sync_records = 0;         // of which SYNCHRONIZATION
  std::uint64_t correlation_records = 0;  // of which EXTERNAL_CORRELATION
  std::uint64_t gpu_records = 0;          // of which kernel, memcpy, memset
  std::uint64_t records_dropped = 0;      // no buffer: the client declined a request
  std::uint64_t buffers_requested = 0;
  std::uint64_t buffers_completed = 0;
  std::uint64_t incomplete_at_forced_flush = 0;  // records returned with kind INVALID
  std::uint64_t in_flight_at_forced_flush = 0;   // records returned with end == 0
  // A CUPTI entry point could not take CUPTI's internal lock within the deadlock timeout: a
  // client made a CUPTI call while holding a lock its own buffer callbacks wait for.
  std::uint64_t lock_order_violations = 0;
  // The buffer probe fired: a request ran on another thread while a completion callback was
  // inside a CUPTI call (the interleaving that deadlocks a client with the wrong lock order).
  std::uint64_t race_probes = 0;
  // A client answered a request with a buffer smaller than the size it claimed.
  std::uint64_t undersized_buffers = 0;
  int subscribers = 0;  // 0 or 1: CUPTI allows one
};

// A recorded run's CUDA API call (an Nsight export's runtime row), replayed as it happened: its
// times are host ns on the stand-in's clock (the test maps the recording's clock onto it, in the
// past), its thread and correlation ids the recording's own.
struct RecordedCall {
  CUpti_CallbackDomain domain = CUPTI_CB_DOMAIN_RUNTIME_API;
  std::uint32_t cbid = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  std::uint32_t thread_id = 0;
  std::uint32_t correlation_id = 0;
};

// The GPU work a recorded call launched, at its recorded device times (host ns, as above).
struct RecordedGpu {
  CUpti_ActivityKind kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;  // or MEMCPY, MEMSET
  std::uint32_t device = 0, stream = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  const char* name = nullptr;  // a kernel's (mangled) name
  std::int32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  std::uint8_t copy_kind = 0, src_kind = 0, dst_kind = 0;  // CUPTI's enums
  bool async = false;
  std::uint64_t bytes = 0;  // copies and memsets
};

struct Control {
  void (*reset)() = nullptr;  // a fresh process: no subscriber, no callbacks, nothing enabled
  // A tool that owns CUPTI from the process start (Nsight Systems, Nsight Compute): every
  // cuptiSubscribe fails and cuptiSubscribe_v2 names it. nullptr: none.
  void (*set_injected_tool)(const char* name) = nullptr;
  Stats (*stats)() = nullptr;
  // Whether this activity kind is enabled, and whether this runtime / driver cbid is recorded.
  bool (*kind_enabled)(CUpti_ActivityKind) = nullptr;
  bool (*runtime_cbid_enabled)(std::uint32_t) = nullptr;
  bool (*driver_cbid_enabled)(std::uint32_t) = nullptr;
  int (*enabled_kind_count)() = nullptr;
  int (*enabled_cbid_count)() = nullptr;  // runtime + driver cbids recorded

  // --- a simulated CUDA program (each call on the calling thread) ---
  // A runtime API call that launches nothing (cudaGetDevice, cudaStreamIsCapturing...): its
  // record when the cbid is enabled; inner driver calls as the runtime makes them.
  std::uint32_t (*runtime_call)(std::uint32_t cbid) = nullptr;
  std::uint32_t (*driver_call)(std::uint32_t cbid) = nullptr;
  // cudaLaunchKernel (or, with via_driver, cuLaunchKernel as cuBLASLt and Triton do): the API
  // record, then a kernel that runs duration_ns on stream once the stream is free.
  std::uint32_t (*launch_kernel)(const char* name, std::uint32_t stream, std::int64_t duration_ns,
                                 bool via_driver) = nullptr;
  // cudaMemcpyAsync (async) or cudaMemcpy: the API record and the copy on stream.
  std::uint32_t (*memcpy)(std::uint8_t copy_kind, std::uint8_t src_kind, std::uint8_t dst_kind,
                          std::uint64_t bytes, std::uint32_t stream, std::int64_t duration_ns,
                          bool async) = nullptr;
  // cudaStreamSynchronize: waits on the host until stream's work has finished.
  std::uint32_t (*stream_synchronize)(std::uint32_t stream) = nullptr;
  // cudaEventQuery of an event on stream: an API call and, as CUDA 13's CUPTI does, a
  // SYNCHRONIZATION record (returnValue CUDA_ERROR_NOT_READY while the stream is busy).
  std::uint32_t (*event_query)(std::uint32_t stream) = nullptr;
  // cudaEventRecord: what fathom's phase timing calls twice a phase.
  std::uint32_t (*event_record)(std::uint32_t stream) = nullptr;
  // --- a recorded CUDA program (issue 23: Nsight exports through the live path) ---
  // The cbid of a call by its name, with or without CUPTI's version suffix ("cudaLaunchKernel",
  // "cudaLaunchKernel_v7000"); 0 when this CUDA version has none.
  std::uint32_t (*cbid_of)(CUpti_CallbackDomain domain, const char* name) = nullptr;
  // The call's records as CUPTI writes them at its exit (external correlation records from the
  // calling thread's stacks, then its own with the recorded thread and correlation ids), and
  // its GPU work (n records, may be 0) reserved in their streams' queues, complete once the host
  // clock has passed their recorded end. Kernels of one name share one name string, as CUPTI's do.
  void (*replay_call)(const RecordedCall& call, const RecordedGpu* gpu, std::size_t n) = nullptr;
  // The replayed run's host clock from now on: GPU work is done (its record complete) once this
  // time has passed its end, and wait_gpu() moves it to the end of the work queued. It only goes
  // forward, so a replay keeps CUPTI's delivery rules whatever the machine's load; 0: the real
  // clock again (reset() does that too).
  void (*set_replay_time)(std::int64_t host_ns) = nullptr;

  // Holds GPU work: nothing completes while paused (work still running at a forced flush).
  void (*pause_gpu)(bool paused) = nullptr;
  // Waits on the host until every stream is idle (cudaDeviceSynchronize without a record).
  void (*wait_gpu)() = nullptr;

  // --- probes ---
  // While on, every completion callback runs concurrently with a buffer request on another
  // thread that holds CUPTI's lock (as CUPTI's worker can at any time); a client that calls
  // CUPTI from a completion callback while holding a lock its request callback takes deadlocks,
  // which the stand-in detects after timeout_ms, counts, and breaks by failing that call.
  void (*set_race_probe)(bool on, int timeout_ms) = nullptr;
  // A buffer counts as full after this many records (0: when its bytes run out), so tests can
  // make CUPTI hand buffers back on its worker thread without writing megabytes.
  void (*set_record_limit_per_buffer)(std::size_t records) = nullptr;
  // Failure injection: the named CUPTI entry point ("cuptiActivityFlushAll") answers r from now
  // on (CUPTI_SUCCESS: behaves again); cuptiActivityEnable of one kind answers r.
  void (*set_result)(const char* function, CUptiResult r) = nullptr;
  void (*set_enable_result)(CUpti_ActivityKind kind, CUptiResult r) = nullptr;
  CUptiResult (*set_thread_id_type)(CUpti_ActivityThreadIdType) = nullptr;
  // The thread id CUPTI writes into records of the calling thread, for the current type.
  std::uint32_t (*thread_id)() = nullptr;
  // A CUPTI timestamp now, as records would carry it (after a registered timestamp callback).
  std::uint64_t (*timestamp)() = nullptr;
  // Whether the calling thread has ids pushed for the kind (depth of CUPTI's stack).
  std::size_t (*external_depth)(CUpti_ExternalCorrelationKind) = nullptr;

  // The CUPTI functions the stand-in exports beyond fathom's Api, for other clients (the
  // Kineto look-alike) to call as torch's Kineto does.
  CUptiResult (*register_timestamp_callback)(CUpti_TimestampCallbackFunc) = nullptr;
  CUptiResult (*enable_runtime_api)(CUpti_CallbackId, std::uint8_t) = nullptr;
  CUptiResult (*enable_driver_api)(CUpti_CallbackId, std::uint8_t) = nullptr;
  CUptiResult (*finalize)() = nullptr;

  std::string path;  // where the library was loaded from
  cupti::Api api;    // fathom's view of it (load_cupti_from(path))
};

// Loads the stand-in once per process (from FATHOM_CUPTI_STANDIN_PATH, compiled into the tests)
// and resets it. Aborts the test with a message when it cannot be loaded.
Control& load();

}  // namespace fathom::standin
