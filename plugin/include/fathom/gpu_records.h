#pragma once
// What the GPU did, as plain records: the contract between the sources (CUPTI activity buffers,
// a Kineto / PyTorch profiler trace, a replay file, synthetic test data) and the analyses.
// No CUPTI or torch types here. Times are nanoseconds on one clock per source; analyses only
// compare times from the same source.
#include <fathom/phase.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

// Where a copy's side lives. Pageable vs pinned is what decides whether a host copy can be
// asynchronous and how fast it runs.
enum class MemoryKind : std::uint8_t { Unknown, Pageable, Pinned, Device, Managed };

enum class MemcpyKind : std::uint8_t {
  Unknown,
  HostToDevice,
  DeviceToHost,
  DeviceToDevice,
  HostToHost,
  PeerToPeer
};

// Where and when one piece of device work ran and what launched it: the fields every device
// record kind (kernel, copy, memset) shares, which each source reads in one place.
struct GpuSpan {
  std::int32_t device = 0;
  std::int32_t stream = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint64_t correlation_id = 0;  // ties the work to its launching runtime call
  std::uint64_t external_id = 0;  // the op that launched it (OpRecord::external_id); 0 if unknown
  std::optional<Phase> phase;     // the fathom phase open when it was launched, if known
};

struct KernelRecord : GpuSpan {
  std::string name;  // mangled or demangled, as the source gives it
  std::int32_t grid_x = 0, grid_y = 0, grid_z = 0;
  std::int32_t block_x = 0, block_y = 0, block_z = 0;
  // The source's key for the name, 0 if it has none: records with one key have one name (CUPTI
  // shares a kernel's name string among its records; the collector passes its address). Lets the
  // aggregator find the name's row without hashing it; a key that names two strings is only
  // slower, never wrong.
  std::uint64_t name_key = 0;
};

struct MemcpyRecord : GpuSpan {
  MemcpyKind kind = MemcpyKind::Unknown;
  MemoryKind src = MemoryKind::Unknown;
  MemoryKind dst = MemoryKind::Unknown;
  std::int64_t bytes = 0;
  bool async = false;  // issued by an asynchronous API (cudaMemcpyAsync)
  // The launching call was in the records: false when it was not, and async says nothing (a
  // copy is then neither synchronous nor asynchronous in any analysis).
  bool async_known = true;
};

struct MemsetRecord : GpuSpan {
  std::int64_t bytes = 0;
};

enum class SyncKind : std::uint8_t { Unknown, Event, Stream, StreamWaitEvent, Context, Device };

// The host waiting on the device (cudaStreamSynchronize, cudaEventSynchronize, ...).
struct SyncRecord {
  SyncKind kind = SyncKind::Unknown;
  std::int32_t stream = -1;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint64_t correlation_id = 0;
  std::uint64_t external_id = 0;  // the op that waited (aten::item, ...); 0 if unknown
  std::optional<Phase> phase;
};

// A CUDA runtime or driver API call on the host (cudaLaunchKernel, cudaMemcpyAsync, ...).
struct RuntimeCallRecord {
  std::string name;
  std::uint64_t thread = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint64_t correlation_id = 0;
  std::uint64_t external_id = 0;
  std::optional<Phase> phase;
};

// An ATen op on the host, with the shapes of its inputs when they were recorded.
struct OpRecord {
  std::string name;  // "aten::addmm"
  std::int64_t sequence_nr = -1;
  std::uint64_t thread = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint64_t external_id = 0;
  std::vector<std::vector<std::int64_t>> input_shapes;
  std::vector<std::string> input_dtypes;  // "float", "c10::BFloat16", ... as the source names them
};

// A host-side span that names a region (a fathom phase or step, a user annotation,
// ProfilerStep#N in a PyTorch trace).
// What a host annotation is to the analyses: a training step (the wall clock the timeline is
// measured against), a phase (what GPU work launched inside it is attributed to), or neither.
// Set by whoever makes the record (the session knows; a trace reader decides from the name),
// so the aggregator never parses names.
enum class AnnotationRole : std::uint8_t { None, Step, Phase };

struct AnnotationRecord {
  std::string name;
  std::uint64_t thread = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  AnnotationRole role = AnnotationRole::None;
  Phase phase = Phase::Data;  // when role == Phase
};

// The device the records came from, where the source says.
struct DeviceProperties {
  std::int32_t id = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::int64_t total_memory_bytes = 0;
};

// Everything one source produced: what an analysis reads.
std::string_view memcpy_kind_name(MemcpyKind k) noexcept;  // "HtoD", "DtoH", "DtoD", ...
std::string_view memory_kind_name(MemoryKind k) noexcept;  // "pageable", "pinned", "device", ...

struct GpuActivity {
  std::vector<DeviceProperties> devices;
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> memcpys;
  std::vector<MemsetRecord> memsets;
  std::vector<SyncRecord> syncs;
  std::vector<RuntimeCallRecord> runtime_calls;
  std::vector<OpRecord> ops;
  std::vector<AnnotationRecord> annotations;
  std::int64_t dropped_records = 0;  // lost by the source (full buffers); reported, never hidden
};

}  // namespace fathom
