// The statistics tables every record lands in, and the host records held for the sweep.
#include <fathom/gpu_records.h>

#include "aggregate/aggregator_state.h"
#include "aggregate/tensor_core_ops.h"
#include "base/kernel_name.h"
#include "base/thresholds.h"

namespace fathom {

std::uint32_t GpuAggregator::Impl::intern_kernel(std::string_view raw, std::int32_t device) {
  // The source's text (cut to its prefix) first: a mangled name is demangled once, not per record.
  const std::string_view text = kernel_name_prefix(raw);
  const bool mangled = text.starts_with("_Z");  // the only names the normalizer changes
  if (mangled)
    if (auto it = source_names.find(text); it != source_names.end()) return it->second;
  if (auto it = kernel_index.find(text); it != kernel_index.end()) return it->second;
  std::string name = normalize_kernel_name(text);
  const bool renamed = name != text;
  auto remember = [&](std::uint32_t id) {
    // Bounded as the rows are: past the limit a mangled name is demangled at each record.
    if (renamed && source_names.size() < limits.kernel_names) source_names.emplace(text, id);
    return id;
  };
  if (renamed)
    if (auto it = kernel_index.find(name); it != kernel_index.end()) return remember(it->second);
  KernelClass kind = classify_kernel(name, capability(device));
  if (kernel_index.size() >= limits.kernel_names) {
    // Past the limit, names share a row per kind so the Tensor Core and NCCL totals stay exact.
    ++folded_names;
    name = kind.communication                   ? "(more kernel names: communication)"
           : kind.decision == Decision::Unknown ? "(more kernel names: unknown)"
           : kind.tensor_core                   ? "(more kernel names: tensor core)"
                                                : "(more kernel names)";
    kind.family = "folded";
    kind.precision = Precision::Unknown;
    kind.needs_capability = false;  // the row mixes names: it cannot say why each is unknown
    if (auto it = kernel_index.find(name); it != kernel_index.end()) return it->second;
  }
  const auto id = static_cast<std::uint32_t>(kernels.size());
  KernelStats s;
  s.name = name;
  s.kind = kind;
  kernels.push_back(std::move(s));
  kernel_index.emplace(std::move(name), id);
  return remember(id);
}

std::uint32_t GpuAggregator::Impl::kernel_row(const KernelRecord& r) {
  const std::string_view text = kernel_name_prefix(r.name);
  if (auto row = kernel_keys.find(r.name_key, text)) return *row;
  const std::uint32_t id = intern_kernel(r.name, r.device);
  // The key remembers the text it was seen with (the index's copy of it, which outlives the
  // slot); a folded row is found by hashing, as before.
  if (r.name_key == 0) return id;
  if (auto it = source_names.find(text); it != source_names.end() && it->second == id) {
    kernel_keys.remember(r.name_key, id, it->first);
  } else if (auto k = kernel_index.find(text); k != kernel_index.end() && k->second == id) {
    kernel_keys.remember(r.name_key, id, k->first);
  }
  return id;
}

namespace {

// The held row's fields every device record kind gives alike (its span, gpu_records.h); the
// caller adds what its kind knows.
HeldGpu held_span(const GpuSpan& r, std::int64_t duration, HeldType type) {
  HeldGpu h;
  h.start = r.start_ns;
  h.end = r.start_ns + duration;
  h.correlation = r.correlation_id;
  h.external_id = r.external_id;
  h.device = r.device;
  h.type = type;
  h.phase = phase_index(r.phase);
  return h;
}

}  // namespace

void GpuAggregator::Impl::add_kernel(const KernelRecord& r) {
  const std::uint32_t id = kernel_row(r);
  KernelStats& k = kernels[id];
  const std::int64_t d = duration(r.start_ns, r.end_ns);
  k.min_ns = k.count ? std::min(k.min_ns, d) : d;
  k.max_ns = std::max(k.max_ns, d);
  ++k.count;
  k.total_ns += d;
  if (d < thresholds::kTinyKernelNs) {
    ++k.tiny_count;
    k.tiny_ns += d;
  }
  HeldGpu h = held_span(r, d, HeldType::Kernel);
  h.tensor_core = k.kind.tensor_core;
  h.communication = k.kind.communication;
  h.undecided = k.kind.decision == Decision::Unknown;
  h.op_may_decide = tensor_core_by_op(k.kind, capability(r.device), true);
  h.kernel = id;
  hold(h);
}

void GpuAggregator::Impl::add_memcpy(const MemcpyRecord& r) {
  auto it = std::find_if(memcpys.begin(), memcpys.end(), [&](const MemcpyStats& m) {
    return m.kind == r.kind && m.src == r.src && m.dst == r.dst && m.async == r.async &&
           m.async_known == r.async_known;
  });
  if (it == memcpys.end()) {
    memcpys.push_back(MemcpyStats{r.kind, r.src, r.dst, r.async && r.async_known, r.async_known});
    it = memcpys.end() - 1;
  }
  const std::int64_t d = duration(r.start_ns, r.end_ns);
  ++it->count;
  it->bytes += r.bytes;
  it->total_ns += d;
  if (r.bytes > thresholds::kSyncCopyBytes) ++it->large_count;
  HeldGpu h = held_span(r, d, HeldType::Memcpy);
  h.bytes = r.bytes;
  hold(h);
}

void GpuAggregator::Impl::add_memset(const MemsetRecord& r) {
  const std::int64_t d = duration(r.start_ns, r.end_ns);
  ++memsets.count;
  memsets.bytes += r.bytes;
  memsets.total_ns += d;
  HeldGpu h = held_span(r, d, HeldType::Memset);
  h.bytes = r.bytes;
  hold(h);
}

void GpuAggregator::Impl::hold(const HeldGpu& h) {
  note_time(h.start, h.end);
  max_gpu_end = std::max(max_gpu_end, h.end);
  held.push(h);
  if (held.size() >= limits.window_records) sweep();
}

void GpuAggregator::Impl::add_sync(const SyncRecord& r) {
  auto it = std::find_if(syncs.begin(), syncs.end(),
                         [&](const SyncStats& s) { return s.kind == r.kind; });
  if (it == syncs.end()) {
    syncs.push_back(SyncStats{r.kind});
    it = syncs.end() - 1;
  }
  ++it->count;
  it->total_ns += duration(r.start_ns, r.end_ns);
  note_time(r.start_ns, r.end_ns);
  // A stream waiting on an event blocks the stream, not the host.
  if (r.kind != SyncKind::StreamWaitEvent) host_syncs.push_back({r.start_ns, r.end_ns, generation});
  check_host_limit();
}

void GpuAggregator::Impl::add_runtime(const RuntimeCallRecord& r) {
  std::uint32_t id = last_runtime;
  if (id >= runtime_calls.size() || runtime_calls[id].name != r.name) {
    if (auto it = runtime_index.find(r.name); it != runtime_index.end()) {
      id = it->second;
    } else {
      id = static_cast<std::uint32_t>(runtime_calls.size());
      runtime_blocks.reserve(runtime_calls.size() + 1);  // then the rows stay aligned
      runtime_launches.reserve(runtime_calls.size() + 1);
      runtime_calls.push_back(RuntimeStats{r.name});
      runtime_blocks.push_back(is_host_sync_call(r.name));
      runtime_launches.push_back(launches_gpu_work(r.name));
      runtime_index.emplace(r.name, id);
    }
    last_runtime = id;
  }
  ++runtime_calls[id].count;
  runtime_calls[id].total_ns += duration(r.start_ns, r.end_ns);
  note_time(r.start_ns, r.end_ns);
  // Only a call that launches GPU work is owed a GPU record: the others are not kept.
  if (r.correlation_id != 0 && runtime_launches[id]) {
    // A repeated id replaces its launch (CUPTI's ids are unique: not counted again).
    if (launches[cur()].assign(r.correlation_id,
                               Launch{r.start_ns, r.thread, r.external_id, phase_index(r.phase)}))
      ++unpaid[cur()];
    latest_launch = std::max(latest_launch, r.start_ns);
  }
  if (runtime_blocks[id]) host_syncs.push_back({r.start_ns, r.end_ns, generation});
  check_host_limit();
}

void GpuAggregator::Impl::add_op(const OpRecord& r) {
  note_time(r.start_ns, r.end_ns);
  if (!tensor_core_eligible_op(r.name)) return;
  // name \x1f shapes \x1f dtypes, in a string kept from one op to the next: no allocation once
  // the longest key has been seen.
  op_key.assign(r.name);
  op_key += '\x1f';
  const std::size_t shapes_at = op_key.size();
  append_op_shapes_text(op_key, r.input_shapes);
  const std::size_t shapes_end = op_key.size();
  op_key += '\x1f';
  const std::size_t dtypes_at = op_key.size();
  append_op_dtypes_text(op_key, r.input_shapes, r.input_dtypes);
  op_dtypes = op_dtypes || op_key.size() > dtypes_at;
  std::uint32_t id;
  if (auto it = op_index.find(std::string_view(op_key)); it != op_index.end()) {
    id = it->second;
  } else if (op_index.size() >= limits.op_keys) {
    ++folded_ops;
    auto f = op_index.find(std::string_view("(more op shapes)"));
    if (f == op_index.end()) {
      id = static_cast<std::uint32_t>(ops.size());
      EligibleOpStats folded;
      folded.name = "(more op shapes)";
      ops.push_back(std::move(folded));
      op_index.emplace("(more op shapes)", id);
    } else {
      id = f->second;
    }
  } else {
    id = static_cast<std::uint32_t>(ops.size());
    ops.push_back(EligibleOpStats{r.name, op_key.substr(shapes_at, shapes_end - shapes_at),
                                  op_key.substr(dtypes_at),
                                  dims_not_multiple_of_8(r.name, r.input_shapes)});
    op_index.emplace(op_key, id);
  }
  ++ops[id].instances;
  auto& instances = op_instances[cur()];
  if (r.external_id != 0)
    op_by_external_id[cur()].assign(r.external_id, static_cast<std::uint32_t>(instances.size()));
  OpInstance instance{id, r.start_ns, r.end_ns, r.thread};
  instance.external_id = r.external_id;
  instance.tensor_core_inputs = tensor_core_input_types(r.input_dtypes);
  instances.push_back(instance);
  check_host_limit();
}

void GpuAggregator::Impl::add_annotation(const AnnotationRecord& r) {
  note_time(r.start_ns, r.end_ns);
  if (r.role == AnnotationRole::Step) {
    ++steps;
    step_ns += duration(r.start_ns, r.end_ns);
    first_step = std::min(first_step, r.start_ns);
    last_step_end = std::max(last_step_end, r.end_ns);
    if (limits.step_rows > 0) add_step_row(r);
  } else if (r.role == AnnotationRole::Phase) {
    ranges.push_back(PhaseRange{r.start_ns, r.end_ns, r.thread, generation, r.phase});
    check_host_limit();
  }
}

void GpuAggregator::Impl::check_host_limit() {
  if (++host_added >= limits.host_records / 2) sweep();
}

}  // namespace fathom
