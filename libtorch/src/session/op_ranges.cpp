#include "session/op_ranges.h"

#include <ATen/record_function.h>

#include <memory>
#include <string>

#include "collect/nvtx.h"

namespace fathom::detail {
namespace {

// Remembers how the range was opened, so the end callback closes it the same way.
struct OpRange : at::ObserverContext {
  bool process_range = false;
  nvtx::RangeId id = 0;
};

void append_shapes(std::string& msg, const at::RecordFunction& fn) {
  msg += " [";
  bool first = true;
  for (const c10::IValue& v : fn.inputs()) {
    if (!first) msg += ", ";
    first = false;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      msg += "[";
      if (t.defined()) {
        for (int64_t i = 0; i < t.dim(); ++i) {
          if (i) msg += ", ";
          msg += std::to_string(t.sizes()[i]);
        }
      }
      msg += "]";
    } else {
      msg += "[]";
    }
  }
  msg += "]";
}

template <bool kShapes>
std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  std::string msg = fn.name();
  if (fn.seqNr() >= 0) {
    msg += ", seq = ";
    msg += std::to_string(fn.seqNr());
  }
  if constexpr (kShapes) append_shapes(msg, fn);
  auto ctx = std::make_unique<OpRange>();
  // An async op may end on another thread than the one that started it: a thread-local
  // push/pop would then be unbalanced, a process range is not.
  if (fn.isAsync()) {
    ctx->process_range = true;
    ctx->id = nvtx::start(nvtx::Kind::Op, msg.c_str());
  } else {
    nvtx::push(nvtx::Kind::Op, msg.c_str());
  }
  return ctx;
}

void on_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  auto* r = static_cast<OpRange*>(ctx);
  if (r && r->process_range) {
    nvtx::end(r->id);
  } else {
    nvtx::pop();
  }
}

}  // namespace

OpRanges::OpRanges(bool record_shapes) {
  if (!nvtx::tool_attached()) return;
  at::RecordFunctionCallback cb(record_shapes ? &on_start<true> : &on_start<false>, &on_end);
  cb.needsInputs(record_shapes)
      .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION});
  handle_ = at::addGlobalCallback(cb);
  registered_ = true;
}

OpRanges::~OpRanges() {
  if (registered_) at::removeCallback(handle_);
}

}  // namespace fathom::detail
