#include "checkpoint/op_interception.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <fathom/error.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <optional>

#include "measure/op_flop_callback.h"

namespace fathom::detail {
namespace {

// Below Autograd and ADInplaceOrView (so autograd has recorded the op's node before the fallback
// runs, and builds it from whatever the fallback returns), above the backends. Nothing in
// LibTorch dispatches on it unless a thread includes it.
constexpr c10::DispatchKey kInterceptKey = c10::DispatchKey::Fake;
static_assert(kInterceptKey < c10::DispatchKey::ADInplaceOrView &&
                  kInterceptKey < c10::DispatchKey::AutogradFunctionality &&
                  kInterceptKey > c10::DispatchKey::BackendSelect,
              "op_interception.cpp: the interception key must sit between the backends and "
              "autograd; torch's key order changed, choose another key");

using Context = InterceptContext;

thread_local Context* t_context = nullptr;

std::string name_of(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

// Ops whose outputs can be handed back in a recompute: every return a fresh tensor (no alias of
// an input, so a view op or an in-place op is always recomputed), no argument written.
bool keepable(const c10::FunctionSchema& s) {
  if (s.returns().empty() || s.is_mutable()) return false;
  for (const c10::Argument& r : s.returns()) {
    if (r.alias_info()) return false;
    switch (r.type()->kind()) {
      case c10::TypeKind::TensorType:
      case c10::TypeKind::IntType:
      case c10::TypeKind::SymIntType:
      case c10::TypeKind::FloatType:
      case c10::TypeKind::BoolType:
        break;
      default:
        return false;
    }
  }
  return true;
}

bool is_tensor(const c10::IValue& v) { return v.isTensor() && v.toTensor().defined(); }

void run_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  // The ops the kernel calls inside itself are the kernel's business, not autograd's: hidden.
  c10::impl::ExcludeDispatchKeyGuard hide(kInterceptKey);
  op.redispatchBoxed(ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kInterceptKey),
                     stack);
}

void record(Context& c, const c10::OperatorHandle& op, c10::DispatchKeySet ks,
            torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const bool eligible = keepable(schema);
  const std::size_t n_args = schema.arguments().size();
  std::vector<c10::IValue> args;
  if (eligible && c.policy->has_predicate()) args.assign(stack->end() - n_args, stack->end());
  run_kernel(op, ks, stack);
  OpLog::Op entry;
  entry.name = &op.operator_name();
  if (eligible) {
    const std::size_t n_out = schema.returns().size();
    const auto first = stack->end() - static_cast<std::ptrdiff_t>(n_out);
    CheckpointedOp query;
    query.name = op.operator_name().name;
    query.overload = op.operator_name().overload_name;
    for (auto it = first; it != stack->end(); ++it)
      if (is_tensor(*it)) query.output_bytes += static_cast<std::int64_t>(it->toTensor().nbytes());
    query.index = static_cast<int>(c.log->ops_.size());
    if (c.policy->has_predicate())
      query.flops = flops_of_call(query.name, args, c10::ArrayRef<c10::IValue>(&*first, n_out));
    if (const OpChoice choice = c.policy->choice(query); choice != OpChoice::Recompute) {
      entry.kept = true;
      entry.offload = choice == OpChoice::Offload;
      for (auto it = first; it != stack->end(); ++it) {
        entry.outputs.push_back(*it);
        if (is_tensor(*it)) {
          const at::Tensor& t = it->toTensor();
          entry.counters.emplace_back(t.unsafeGetTensorImpl()->version_counter());
          entry.versions.push_back(t._version());
        } else {
          entry.counters.emplace_back();
          entry.versions.push_back(0);
        }
      }
      c.log->kept_bytes_ += query.output_bytes;
    }
  }
  c.log->ops_.push_back(std::move(entry));
}

[[noreturn]] void mismatch(const OpLog& log, std::size_t at, const c10::OperatorName& ran) {
  const std::string forward = at < log.ops_.size() ? name_of(*log.ops_[at].name)
                                                   : "nothing (the forward ran " +
                                                         std::to_string(log.ops_.size()) + " ops)";
  throw Error("fathom::checkpoint (selective): the recompute does not run the forward's ops: op " +
              std::to_string(at) + " of the recompute is " + name_of(ran) + ", the forward's op " +
              std::to_string(at) + " was " + forward +
              ". The checkpointed function must run the same ops in backward as in the forward "
              "(no branches on requires_grad(), on grad mode or on data that changed in between); "
              "keeping kept outputs for the wrong op would give wrong gradients, so fathom stops. "
              "Make the function deterministic, or checkpoint it without keep()/keep_if()");
}

void replay(Context& c, const c10::OperatorHandle& op, c10::DispatchKeySet ks,
            torch::jit::Stack* stack) {
  OpLog& log = *c.log;
  const std::size_t at = log.cursor_;
  if (at >= log.ops_.size()) mismatch(log, at, op.operator_name());
  OpLog::Op& entry = log.ops_[at];
  if (entry.name != &op.operator_name() && !(*entry.name == op.operator_name()))
    mismatch(log, at, op.operator_name());
  ++log.cursor_;
  if (!entry.kept) {
    run_kernel(op, ks, stack);
    return;
  }
  for (std::size_t i = 0; i < entry.outputs.size(); ++i)
    if (entry.counters[i] && !entry.outputs[i].isTensor())
      throw Error("fathom::checkpoint (selective): the kept outputs of " + name_of(*entry.name) +
                  " were not given back for the recompute; this is a fathom bug, please report it");
  torch::jit::drop(*stack, op.schema().arguments().size());
  // A new tensor over the same storage, sharing the version counter: autograd attaches the
  // recompute's node to it, and the forward's tensor (maybe the checkpoint's output) stays as is.
  for (const c10::IValue& v : entry.outputs) {
    if (is_tensor(v))
      stack->emplace_back(v.toTensor().tensor_data());
    else
      stack->push_back(v);
  }
  count_replayed_kernel();
}

void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  Context* c = t_context;
  if (!c || !c->log) {
    run_kernel(op, ks, stack);
    return;
  }
  if (c->mode == InterceptMode::Record)
    record(*c, op, ks, stack);
  else
    replay(*c, op, ks, stack);
}

// Registered at the first selective checkpoint, not at load: a process that never asks for one
// never claims the key.
void register_fallback() {
  static std::once_flag once;
  static std::unique_ptr<torch::Library> library;
  static std::string failure;
  std::call_once(once, [] {
    try {
      library = std::make_unique<torch::Library>(torch::Library::IMPL, "_", kInterceptKey, __FILE__,
                                                 __LINE__);
      library->fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
    } catch (const std::exception& e) {
      library.reset();
      failure = e.what();
    }
  });
  if (!library)
    throw Error(
        "fathom::checkpoint (selective): cannot register fathom's op interception on the "
        "dispatcher (another library holds the key?): " +
        failure + ". Checkpoint without keep()/keep_if()");
}

}  // namespace

std::vector<at::Tensor> OpLog::take_kept(std::vector<std::string>* demoted,
                                         std::vector<bool>* offload) {
  std::vector<at::Tensor> out;
  for (Op& op : ops_) {
    if (!op.kept) continue;
    bool changed = false;
    for (std::size_t i = 0; i < op.outputs.size(); ++i)
      changed = changed || (op.counters[i] && op.counters[i]->current_version() != op.versions[i]);
    if (changed) {
      op.kept = false;
      for (const c10::IValue& v : op.outputs)
        if (is_tensor(v)) kept_bytes_ -= static_cast<std::int64_t>(v.toTensor().nbytes());
      op.outputs.clear();
      op.counters.clear();
      op.versions.clear();
      if (demoted) demoted->push_back(name_of(*op.name));
      continue;
    }
    // The tensors leave the log (autograd holds them now); the numbers stay.
    for (c10::IValue& v : op.outputs) {
      if (!is_tensor(v)) continue;
      out.push_back(std::move(v).toTensor());
      if (offload) offload->push_back(op.offload);
      v = c10::IValue();
    }
  }
  return out;
}

void OpLog::check_versions() const {
  for (std::size_t k = 0; k < ops_.size(); ++k) {
    const Op& op = ops_[k];
    for (std::size_t i = 0; i < op.counters.size(); ++i) {
      if (!op.counters[i]) continue;
      const std::uint32_t now = op.counters[i]->current_version();
      if (now == op.versions[i]) continue;
      throw Error("fathom::checkpoint (selective): output " + std::to_string(i) + " of " +
                  name_of(*op.name) + " (op " + std::to_string(k) +
                  " of the checkpointed function), kept for backward, was changed in place "
                  "after the forward (version " +
                  std::to_string(op.versions[i]) + ", now " + std::to_string(now) +
                  "); its gradient would be wrong. Change a copy (clone()) instead, or leave " +
                  name_of(*op.name) + " out of keep() so that backward recomputes it");
    }
  }
}

void OpLog::restore_kept(const std::vector<at::Tensor>& kept) {
  std::size_t next = 0;
  for (Op& op : ops_) {
    if (!op.kept) continue;
    for (std::size_t i = 0; i < op.counters.size(); ++i) {
      if (!op.counters[i]) continue;
      if (next >= kept.size())
        throw Error(
            "fathom::checkpoint (selective): fewer kept outputs came back from autograd "
            "than the forward kept; this is a fathom bug, please report it");
      op.outputs[i] = kept[next++];
    }
  }
  cursor_ = 0;
}

void OpLog::finish_replay() {
  const std::size_t ran = cursor_;
  for (Op& op : ops_)  // autograd holds the tensors again until the graph is freed
    for (std::size_t i = 0; i < op.outputs.size(); ++i)
      if (op.counters[i]) op.outputs[i] = c10::IValue();
  cursor_ = 0;
  if (ran != ops_.size())
    throw Error("fathom::checkpoint (selective): the recompute ran " + std::to_string(ran) +
                " ops, the forward " + std::to_string(ops_.size()) + " (the next was " +
                name_of(*ops_[ran].name) +
                "). The checkpointed function must run the same ops in backward as in the "
                "forward; make it deterministic, or checkpoint it without keep()/keep_if()");
}

std::size_t OpLog::kept_ops() const noexcept {
  std::size_t n = 0;
  for (const Op& op : ops_) n += op.kept ? 1 : 0;
  return n;
}

OpInterception::OpInterception(OpLog* log, InterceptMode mode, const CheckpointOptions* policy)
    : outer_(t_context), self_{log, mode, policy} {
  register_fallback();  // before the key is included: without it every op would fail
  include_ = std::make_unique<c10::impl::IncludeDispatchKeyGuard>(kInterceptKey);
  t_context = &self_;
}

OpInterception::~OpInterception() {
  include_.reset();
  t_context = outer_;
}

bool interception_available(std::string* why) noexcept {
  try {
    register_fallback();
    return true;
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return false;
  }
}

bool intercepting() noexcept { return t_context != nullptr; }

std::string keepable_op_problem(const std::string& op) {
  const std::size_t dot = op.find('.');
  const std::string name = op.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : op.substr(dot + 1);
  if (name.find("::") == std::string::npos)
    return "\"" + op + "\" is not an operator name; name ops with their namespace: \"aten::mm\"";
  bool found = false, composite = false, keeps = false;
  for (const c10::OperatorName& n : c10::Dispatcher::singleton().getAllOpNames()) {
    if (n.name != name || (dot != std::string::npos && n.overload_name != overload)) continue;
    auto handle = c10::Dispatcher::singleton().findSchema(n);
    if (!handle) continue;
    found = true;
    if (!keepable(handle->schema())) continue;  // an in-place, out= or view overload
    if (handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd))
      composite = true;
    else
      keeps = true;
  }
  if (keeps) return {};
  if (!found) return "no operator is named \"" + op + "\" (names look like \"aten::mm\")";
  if (composite)
    return op +
           " is a composite: it decomposes into other ops before autograd, so fathom never sees "
           "it; keep the ops it runs (aten::linear runs aten::addmm or aten::mm; aten::conv2d "
           "runs aten::convolution; aten::scaled_dot_product_attention runs a "
           "_scaled_dot_product_*_attention op)";
  return op +
         " changes its input in place or returns a view of it: there is no output of its own "
         "to keep";
}

}  // namespace fathom::detail
