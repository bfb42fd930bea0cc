#include "measure/op_correlation.h"

#include <ATen/record_function.h>

#include <atomic>
#include <memory>

#include "aggregate/tensor_core_ops.h"
#include "collect/clock.h"

namespace fathom::detail {
namespace {

// RecordFunction callbacks are plain functions: they reach the collector through this.
std::atomic<CuptiCollector*> g_collector{nullptr};
std::atomic<std::uint64_t> g_next_id{1};

struct OpContext : at::ObserverContext {
  OpRecord op;
  bool pushed = false;
};

void record_inputs(const at::RecordFunction& fn, OpRecord& op) {
  for (const c10::IValue& v : fn.inputs()) {
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) continue;
    op.input_shapes.emplace_back(t.sizes().begin(), t.sizes().end());
    op.input_dtypes.emplace_back(
        t.dtype().name());  // "float", "c10::BFloat16": as Kineto names them
  }
}

template <bool kShapes>
std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (!tensor_core_eligible_op(fn.name())) return nullptr;
  auto ctx = std::make_unique<OpContext>();
  OpRecord& op = ctx->op;
  op.name = fn.name();
  op.sequence_nr = fn.seqNr();
  // CUPTI's thread id for this thread (pthread_self() truncated, or the OS id), not
  // RecordFunction's threadId(), a counter of its own: launches are matched to ops by it.
  op.thread = cupti_thread_id();
  op.external_id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  if constexpr (kShapes) record_inputs(fn, op);
  // A profile that started since the phase began is seen here, before this op's id goes out
  // (issue 23, 4d: one started and stopped inside a phase is otherwise never seen).
  if (CuptiCollector* collector = g_collector.load(std::memory_order_acquire))
    collector->notice_clients();
  // CUPTI's external id stacks are per thread: an op that may end on another thread is
  // recorded but not pushed.
  if (!fn.isAsync()) {
    push_external_id(ExternalIdKind::Op, op.external_id);
    ctx->pushed = true;
  }
  op.start_ns = now_ns();
  return ctx;
}

void on_end(const at::RecordFunction&, at::ObserverContext* c) {
  auto* ctx = static_cast<OpContext*>(c);
  if (!ctx) return;
  ctx->op.end_ns = now_ns();
  if (ctx->pushed) pop_external_id(ExternalIdKind::Op);
  if (CuptiCollector* collector = g_collector.load(std::memory_order_acquire))
    collector->add_op(std::move(ctx->op));
}

}  // namespace

OpCorrelation::OpCorrelation(CuptiCollector& collector, bool record_shapes) {
  g_collector.store(&collector, std::memory_order_release);
  at::RecordFunctionCallback cb(record_shapes ? &on_start<true> : &on_start<false>, &on_end);
  cb.needsInputs(record_shapes)
      .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION});
  handle_ = at::addGlobalCallback(cb);
}

OpCorrelation::~OpCorrelation() {
  at::removeCallback(handle_);
  g_collector.store(nullptr, std::memory_order_release);
}

}  // namespace fathom::detail
