#include "measure/op_flop_callback.h"

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>
#include <unordered_map>

#include "analyze/flop_formulas.h"
#include "base/warning_sink.h"

namespace fathom::detail {

namespace {
thread_local std::uint64_t t_replayed_kernels = 0;
}  // namespace

void count_replayed_kernel() noexcept { ++t_replayed_kernels; }
std::uint64_t replayed_kernels() noexcept { return t_replayed_kernels; }
namespace {

// RecordFunction callbacks are plain functions: they reach the tally through this. One counting
// callback per process at a time.
std::atomic<FlopTally*> g_tally{nullptr};

// How an op takes part in the count.
struct OpKind {
  FlopFormula formula = FlopFormula::None;
  // An op with a kernel of its own (not a CompositeImplicitAutograd composite): FlopCounterMode
  // sees it as one op and nothing it calls inside.
  bool opaque = false;
  bool uncounted = false;  // products no formula counts: named in the report
};

OpKind classify(const char* name, const char* overload) {
  OpKind kind;
  kind.formula = flop_formula_of(name);
  if (kind.formula != FlopFormula::None) {
    kind.opaque = true;
    return kind;
  }
  auto op = c10::Dispatcher::singleton().findSchema({name, overload ? overload : ""});
  kind.opaque = op && !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
  kind.uncounted = kind.opaque && computes_uncounted_products(name);
  return kind;
}

// Per thread: the kinds seen so far (by "name.overload"), and the ops open around the current one.
struct ThreadState {
  std::unordered_map<std::string, OpKind> kinds;
  std::string key;                  // scratch, so a lookup allocates nothing once warm
  int hidden_depth = 0;             // opaque ops open on this thread
  struct Frame* counted = nullptr;  // the outermost counted op open on this thread
};
thread_local ThreadState t_state;

struct Frame : at::ObserverContext {
  bool counts = false;  // the outermost counted op; otherwise an op that hides what it calls
  FlopFormula formula = FlopFormula::None;
  const char* op = nullptr;
  int phase = FlopTally::kNoPhase;
  std::vector<OpArg> inputs;
  std::string dtype;
  // Kernels selective checkpointing skipped on this thread when the op started: a recompute that
  // returns a kept op's forward outputs ran no product, so it is not counted.
  std::uint64_t replayed = 0;
};

const OpKind& kind_of(const at::RecordFunction& fn) {
  ThreadState& s = t_state;
  const char* overload = fn.overload_name();
  s.key.assign(fn.name());
  s.key += '.';
  if (overload) s.key += overload;
  auto it = s.kinds.find(s.key);
  if (it == s.kinds.end()) it = s.kinds.emplace(s.key, classify(fn.name(), overload)).first;
  return it->second;
}

std::string dtype_of(const at::RecordFunction& fn) {
  for (const c10::IValue& v : fn.inputs())
    if (v.isTensor() && v.toTensor().defined()) return torch_dtype_name(v.toTensor().scalar_type());
  return "unknown";
}

OpArg arg_of(const c10::IValue& v, bool read_contents) {
  if (v.isNone()) return OpArg::none();
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return OpArg::none();
    if (read_contents) {
      // A jagged batch's offsets: torch reads them too (offsets.diff().tolist()), a copy to the
      // host in a profiled step.
      at::Tensor host = t.to(at::kCPU, at::kLong).contiguous();
      const std::int64_t* p = host.data_ptr<std::int64_t>();
      return OpArg::ints(std::vector<std::int64_t>(p, p + host.numel()));
    }
    return OpArg::tensor(Shape(t.sizes().begin(), t.sizes().end()));
  }
  if (v.isIntList()) return OpArg::ints(v.toIntVector());
  if (v.isBoolList()) {
    std::vector<std::int64_t> out;
    for (bool b : v.toBoolList()) out.push_back(b ? 1 : 0);
    return OpArg::ints(std::move(out));
  }
  if (v.isBool()) return OpArg::boolean(v.toBool());
  if (v.isInt()) return OpArg::integer(v.toInt());
  return {};
}

std::vector<OpArg> args_of(c10::ArrayRef<c10::IValue> inputs, FlopFormula formula) {
  const auto contents = flop_inputs_read_contents(formula);
  std::vector<OpArg> out;
  out.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i)
    out.push_back(arg_of(inputs[i], std::find(contents.begin(), contents.end(),
                                              static_cast<int>(i)) != contents.end()));
  return out;
}

std::vector<Shape> output_shapes(c10::ArrayRef<c10::IValue> outputs) {
  std::vector<Shape> out;
  for (const c10::IValue& v : outputs) {
    if (v.isTensor() && v.toTensor().defined()) {
      const at::Tensor& t = v.toTensor();
      out.emplace_back(t.sizes().begin(), t.sizes().end());
    } else {
      out.emplace_back();
    }
  }
  return out;
}

}  // namespace

std::vector<OpArg> flop_args(const at::RecordFunction& fn, FlopFormula formula) {
  return args_of(fn.inputs(), formula);
}

std::vector<Shape> flop_output_shapes(const at::RecordFunction& fn) {
  return output_shapes(fn.outputs());
}

namespace {

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  // Ops inside an intra-op parallel region run inside the op that opened it, on whichever
  // thread; an op that may end on another thread would unbalance this thread's nesting.
  if (fn.isAsync() || at::in_parallel_region()) return nullptr;
  FlopTally* tally = g_tally.load(std::memory_order_acquire);
  if (!tally) return nullptr;
  try {
    ThreadState& s = t_state;
    if (s.hidden_depth > 0) {
      // Inside an op with its own kernel. The same op again is the same product seen after
      // autocast's casts (or a Python mode's redispatch): its inputs' type is the one that ran.
      if (s.counted && std::string_view(fn.name()) == s.counted->op)
        s.counted->dtype = dtype_of(fn);
      ++s.hidden_depth;
      return std::make_unique<Frame>();
    }
    const OpKind& kind = kind_of(fn);
    if (!kind.opaque) return nullptr;  // a composite: its leaves count
    auto frame = std::make_unique<Frame>();
    ++s.hidden_depth;
    if (kind.uncounted) tally->add_uncounted(fn.name());
    if (kind.formula != FlopFormula::None) {
      frame->counts = true;
      frame->formula = kind.formula;
      frame->op = fn.name();
      frame->phase = tally->phase();
      frame->inputs = args_of(fn.inputs(), kind.formula);
      frame->dtype = dtype_of(fn);
      frame->replayed = replayed_kernels();
      s.counted = frame.get();
    }
    return frame;
  } catch (...) {
    swallowed("measure/op_flop_callback.cpp: an op's arguments");
    return nullptr;
  }
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  auto* frame = static_cast<Frame*>(ctx);
  if (!frame) return;
  ThreadState& s = t_state;
  if (s.hidden_depth > 0) --s.hidden_depth;
  if (!frame->counts) return;
  if (s.counted == frame) s.counted = nullptr;
  FlopTally* tally = g_tally.load(std::memory_order_acquire);
  if (!tally) return;
  if (replayed_kernels() != frame->replayed) return;  // its kernel did not run
  try {
    if (auto flops = op_flops(frame->formula, frame->inputs, output_shapes(fn.outputs())))
      tally->add(frame->phase, frame->op, frame->dtype, *flops);
    else
      tally->add_unfit(frame->op);
  } catch (...) {
    swallowed("measure/op_flop_callback.cpp: an op's count");
  }
}

}  // namespace

void FlopTally::add(int phase, std::string_view op, std::string_view dtype,
                    std::int64_t flops) noexcept {
  try {
    std::lock_guard lock(mutex_);
    for (Entry& e : entries_) {
      if (e.phase == phase && e.op == op && e.dtype == dtype) {
        ++e.calls;
        e.flops += flops;
        return;
      }
    }
    entries_.push_back({phase, std::string(op), std::string(dtype), 1, flops});
  } catch (...) {
    swallowed("measure/op_flop_callback.cpp: the tally");
  }
}

void FlopTally::add_unfit(std::string_view op) noexcept {
  try {
    std::lock_guard lock(mutex_);
    if (std::find(unfit_.begin(), unfit_.end(), op) == unfit_.end()) unfit_.emplace_back(op);
  } catch (...) {
    swallowed("measure/op_flop_callback.cpp: the tally");
  }
}

void FlopTally::add_uncounted(std::string_view op) noexcept {
  try {
    std::lock_guard lock(mutex_);
    for (auto& [name, calls] : uncounted_) {
      if (name == op) {
        ++calls;
        return;
      }
    }
    uncounted_.emplace_back(std::string(op), 1);
  } catch (...) {
    swallowed("measure/op_flop_callback.cpp: the tally");
  }
}

std::vector<FlopTally::Entry> FlopTally::take(
    std::vector<std::string>* unfit,
    std::vector<std::pair<std::string, std::int64_t>>* uncounted) noexcept {
  try {
    std::lock_guard lock(mutex_);
    if (unfit) {
      for (std::string& op : unfit_)
        if (std::find(unfit->begin(), unfit->end(), op) == unfit->end())
          unfit->push_back(std::move(op));
    }
    unfit_.clear();
    if (uncounted) {
      for (auto& [op, calls] : uncounted_) {
        auto it = std::find_if(uncounted->begin(), uncounted->end(),
                               [&](const auto& u) { return u.first == op; });
        if (it == uncounted->end())
          uncounted->emplace_back(std::move(op), calls);
        else
          it->second += calls;
      }
    }
    uncounted_.clear();
    return std::exchange(entries_, {});
  } catch (...) {
    swallowed("measure/op_flop_callback.cpp: the tally");
    return {};
  }
}

OpFlopCallback::OpFlopCallback(FlopTally& tally) noexcept {
  FlopTally* expected = nullptr;
  if (!g_tally.compare_exchange_strong(expected, &tally, std::memory_order_acq_rel)) return;
  try {
    // Outputs too: the convolutions' formulas read the output's shape, as torch's do.
    at::RecordFunctionCallback cb(&on_start, &on_end);
    cb.needsInputs(true).needsOutputs(true).scopes({at::RecordScope::FUNCTION});
    handle_ = at::addGlobalCallback(cb);
    registered_ = true;
  } catch (...) {
    g_tally.store(nullptr, std::memory_order_release);
    swallowed("measure/op_flop_callback.cpp: registering the callback");
  }
}

OpFlopCallback::~OpFlopCallback() {
  if (!registered_) return;
  at::removeCallback(handle_);
  g_tally.store(nullptr, std::memory_order_release);
}

std::int64_t flops_of_call(std::string_view op, c10::ArrayRef<c10::IValue> inputs,
                           c10::ArrayRef<c10::IValue> outputs) {
  const FlopFormula formula = flop_formula_of(op);
  if (formula == FlopFormula::None) return 0;
  return op_flops(formula, args_of(inputs, formula), output_shapes(outputs)).value_or(0);
}

std::string torch_dtype_name(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return "float32";
    case c10::ScalarType::Double:
      return "float64";
    case c10::ScalarType::Half:
      return "float16";
    case c10::ScalarType::BFloat16:
      return "bfloat16";
    case c10::ScalarType::ComplexHalf:
      return "complex32";
    case c10::ScalarType::ComplexFloat:
      return "complex64";
    case c10::ScalarType::ComplexDouble:
      return "complex128";
    case c10::ScalarType::Byte:
      return "uint8";
    case c10::ScalarType::Char:
      return "int8";
    case c10::ScalarType::Short:
      return "int16";
    case c10::ScalarType::Int:
      return "int32";
    case c10::ScalarType::Long:
      return "int64";
    case c10::ScalarType::Bool:
      return "bool";
    default: {
      // The float8 and newer types: c10 spells them as Python does, in another case
      // ("Float8_e4m3fn" -> "float8_e4m3fn").
      std::string name = c10::toString(type);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return name;
    }
  }
}

}  // namespace fathom::detail
