#include "checkpoint/unit_measure.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "analyze/flop_formulas.h"
#include "base/warning_sink.h"
#include "collect/clock.h"
#include "measure/op_flop_callback.h"

namespace fathom::detail {

struct UnitRecorder::State {
  SavedTensorCapture capture;  // this unit's saved storages, in the order first saved
  std::vector<UnitOp> ops;
  int depth = 0;          // recorded ops open on this thread
  int formula_depth = 0;  // ops with a FLOP formula open (their inner ops are the same product)
  bool failed = false;
  std::optional<at::CallbackHandle> handle;
  std::int64_t overhead_ns = 0;  // spent in the callbacks: not the block's own time
};

namespace {

thread_local UnitRecorder::State* t_recording = nullptr;

struct OpFrame : at::ObserverContext {
  bool top = false;
  std::int64_t begin_ns = 0;
  std::int64_t overhead_before_ns = 0;
  std::size_t saved_before = 0;
  bool counts = false;  // the outermost op with a formula
  FlopFormula formula = FlopFormula::None;
  std::vector<OpArg> args;
};

void add_storages(const c10::IValue& v, std::vector<const void*>& out) {
  auto add = [&](const at::Tensor& t) {
    if (const void* s = storage_of(t).storage;
        s && std::find(out.begin(), out.end(), s) == out.end())
      out.push_back(s);
  };
  if (v.isTensor()) {
    add(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) add(t);
  }
}

std::string short_op_name(const char* name) {
  std::string_view s(name ? name : "");
  if (const auto colons = s.rfind("::"); colons != std::string_view::npos)
    s.remove_prefix(colons + 2);
  return std::string(s);
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  UnitRecorder::State* st = t_recording;
  if (!st || st->failed || fn.isAsync()) return nullptr;
  const std::int64_t entered_ns = now_ns();
  try {
    auto frame = std::make_unique<OpFrame>();
    frame->top = st->depth == 0;
    ++st->depth;
    if (frame->top) {
      UnitOp op;
      op.name = short_op_name(fn.name());
      for (const c10::IValue& v : fn.inputs()) add_storages(v, op.inputs);
      st->ops.push_back(std::move(op));
      frame->saved_before = st->capture.saved().size();
    }
    const FlopFormula formula = flop_formula_of(fn.name());
    if (formula != FlopFormula::None && st->formula_depth++ == 0) {
      frame->counts = true;
      frame->formula = formula;
      frame->args = flop_args(fn, formula);
    }
    if (formula != FlopFormula::None && !st->ops.empty()) st->ops.back().expensive = true;
    const std::int64_t left_ns = now_ns();
    st->overhead_ns += left_ns - entered_ns;
    if (frame->top) {
      frame->begin_ns = left_ns;
      frame->overhead_before_ns = st->overhead_ns;
    }
    return frame;
  } catch (...) {
    st->failed = true;  // the block's measurement is lost, not the step
    swallowed("checkpoint/unit_measure.cpp: an op's start");
    return nullptr;
  }
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  UnitRecorder::State* st = t_recording;
  auto* frame = static_cast<OpFrame*>(ctx);
  if (!st || !frame) return;
  const std::int64_t entered_ns = now_ns();
  try {
    if (st->depth > 0) --st->depth;
    if (frame->formula != FlopFormula::None && st->formula_depth > 0) --st->formula_depth;
    if (st->ops.empty()) return;
    UnitOp& op = st->ops.back();
    if (frame->counts)
      if (auto flops = op_flops(frame->formula, frame->args, flop_output_shapes(fn)))
        op.flops += static_cast<double>(*flops);
    if (frame->top) {
      // Its own time: the callbacks of the ops inside it are fathom's.
      op.ms =
          static_cast<double>(std::max<std::int64_t>(
              entered_ns - frame->begin_ns - (st->overhead_ns - frame->overhead_before_ns), 0)) /
          1e6;
      for (const c10::IValue& v : fn.outputs()) add_storages(v, op.outputs);
      const auto& saved = st->capture.saved();
      op.saved.assign(saved.begin() + static_cast<std::ptrdiff_t>(frame->saved_before),
                      saved.end());
    }
  } catch (...) {
    st->failed = true;
    swallowed("checkpoint/unit_measure.cpp: an op's end");
  }
  st->overhead_ns += now_ns() - entered_ns;
}

}  // namespace

UnitRecorder::UnitRecorder() noexcept {
  if (t_recording) return;  // a unit inside a unit: the outer one is the chain's
  try {
    state_ = std::make_unique<State>();
    state_->handle = at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end)
                                                    .needsInputs(true)
                                                    .needsOutputs(true)
                                                    .scopes({at::RecordScope::FUNCTION}));
    t_recording = state_.get();
  } catch (const std::exception& e) {
    warn("the block's op groups are not measured: ", e.what());
    state_.reset();
  }
}

UnitRecorder::~UnitRecorder() {
  if (!state_) return;
  if (t_recording == state_.get()) t_recording = nullptr;
  if (state_->handle) at::removeCallback(*state_->handle);
}

std::int64_t UnitRecorder::overhead_ns() const noexcept { return state_ ? state_->overhead_ns : 0; }

MeasuredUnit UnitRecorder::finish(
    const at::Tensor& input,
    const std::unordered_map<const void*, std::int64_t>& earlier) noexcept {
  if (!state_) return {};
  if (t_recording == state_.get()) t_recording = nullptr;
  if (state_->handle) {
    at::removeCallback(*state_->handle);
    state_->handle.reset();
  }
  if (state_->failed || state_->depth != 0) return {};
  try {
    return group_unit_ops(state_->ops, storage_of(input).storage, earlier);
  } catch (...) {
    swallowed("checkpoint/unit_measure.cpp: grouping");
    return {};
  }
}

MeasuredUnit group_unit_ops(const std::vector<UnitOp>& ops, const void* input,
                            const std::unordered_map<const void*, std::int64_t>& earlier) {
  MeasuredUnit m;
  m.ops = static_cast<int>(ops.size());
  const int n = m.ops;
  // Who made each storage: the first top-level op that returned it (the unit's input is made by
  // none); a storage saved but never returned, the op that saved it.
  std::unordered_map<const void*, int> producer;
  for (int k = 0; k < n; ++k)
    for (const void* s : ops[k].outputs)
      if (s != input) producer.emplace(s, k);
  std::vector<std::int64_t> charged(n, 0);  // saved bytes each op produced
  std::unordered_set<const void*> counted;
  for (int k = 0; k < n; ++k) {
    for (const SavedTensorCapture::Saved& s : ops[k].saved) {
      if (s.storage == input) {
        m.unit.input_saved_bytes = s.bytes;
        continue;
      }
      if (earlier.count(s.storage) || !counted.insert(s.storage).second) continue;
      auto it = producer.find(s.storage);
      if (it == producer.end()) it = producer.emplace(s.storage, k).first;
      charged[it->second] += s.bytes;
    }
  }
  // Groups, closed at each op that made a saved storage.
  std::vector<int> group_of(n, -1);
  std::vector<int> pending;
  auto close = [&](std::int64_t saved_bytes) {
    SavedGroup g;
    std::vector<int> positions;
    for (int k : pending) {
      g.forward_ms += ops[k].ms;
      g.flops += ops[k].flops;
      g.expensive = g.expensive || ops[k].expensive;
      group_of[k] = static_cast<int>(m.unit.groups.size());
      positions.push_back(k);
    }
    g.saved_bytes = saved_bytes;
    g.name = ops[pending.back()].name;
    m.unit.groups.push_back(std::move(g));
    m.group_ops.push_back(std::move(positions));
    m.group_producer.push_back(pending.back());
    pending.clear();
  };
  for (int k = 0; k < n; ++k) {
    // A view or an in-place op of the group that just closed belongs to it.
    bool aliases_last = !m.unit.groups.empty() && pending.empty() && !ops[k].outputs.empty();
    for (const void* s : ops[k].outputs) {
      auto it = producer.find(s);
      aliases_last = aliases_last && it != producer.end() && it->second < k &&
                     group_of[it->second] == static_cast<int>(m.unit.groups.size()) - 1;
    }
    if (aliases_last && charged[k] == 0) {
      SavedGroup& g = m.unit.groups.back();
      g.forward_ms += ops[k].ms;
      g.flops += ops[k].flops;
      g.expensive = g.expensive || ops[k].expensive;
      group_of[k] = static_cast<int>(m.unit.groups.size()) - 1;
      m.group_ops.back().push_back(k);
      continue;
    }
    pending.push_back(k);
    if (charged[k] > 0) {
      std::int64_t bytes = 0;
      for (int p : pending) bytes += charged[p];
      close(bytes);
    }
  }
  if (!pending.empty()) close(0);  // the unit's output, saved by the next unit if at all
  // What each group reads: the unit's input, or earlier groups' outputs.
  for (std::size_t g = 0; g < m.unit.groups.size(); ++g) {
    std::vector<int>& in = m.unit.groups[g].inputs;
    for (int k : m.group_ops[g]) {
      for (const void* s : ops[k].inputs) {
        int from = -2;
        if (s == input) {
          from = kUnitInput;
        } else if (auto it = producer.find(s); it != producer.end() && it->second < k) {
          from = group_of[it->second];
          if (from == static_cast<int>(g)) from = -2;  // inside the group
        }
        if (from != -2 && std::find(in.begin(), in.end(), from) == in.end()) in.push_back(from);
      }
    }
    std::sort(in.begin(), in.end());
  }
  // Names that repeat in the unit get their position (the second linear is "linear#2").
  std::unordered_map<std::string, int> seen;
  for (SavedGroup& g : m.unit.groups)
    if (int c = ++seen[g.name]; c > 1) g.name += "#" + std::to_string(c);
  return m;
}

}  // namespace fathom::detail
