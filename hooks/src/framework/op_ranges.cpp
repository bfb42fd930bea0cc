#include "framework/op_ranges.h"

#include <ATen/record_function.h>

#include <cstring>
#include <memory>
#include <string>

#include "collect/nvtx.h"
#include "collect/nvtx_name_cache.h"

namespace fathom::detail {
namespace {

// Only ops that may end on another thread get a context: it carries their process range's id.
// Every other op's end pops the range its start pushed on this thread.
struct ProcessRange : at::ObserverContext {
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

std::unique_ptr<at::ObserverContext> process_range(nvtx::RangeId id) {
  auto ctx = std::make_unique<ProcessRange>();
  ctx->id = id;
  return ctx;
}

// The hot path: the op's registered name (one lookup; registered on its first sighting) and its
// sequence number as the range's payload. Nothing is allocated for an op that ends on the thread
// that started it.
std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  const char* text = fn.name();
  const nvtx::Name name = nvtx::op_names().find(std::string_view(text, std::strlen(text)));
  const std::int64_t seq = fn.seqNr();
  // An async op may end on another thread than the one that started it: a thread-local
  // push/pop would then be unbalanced, a process range is not.
  if (fn.isAsync()) {
    nvtx::RangeId id = 0;
    if (name.handle)
      id = seq >= 0 ? nvtx::start(nvtx::Kind::Op, name, nvtx::Payload{seq})
                    : nvtx::start(nvtx::Kind::Op, name);
    else  // the cache is full: the text itself
      id = seq >= 0 ? nvtx::start(nvtx::Kind::Op, text, nvtx::Payload{seq})
                    : nvtx::start(nvtx::Kind::Op, text);
    return process_range(id);
  }
  if (name.handle) {
    if (seq >= 0)
      nvtx::push(nvtx::Kind::Op, name, nvtx::Payload{seq});
    else
      nvtx::push(nvtx::Kind::Op, name);
  } else if (seq >= 0) {
    nvtx::push(nvtx::Kind::Op, text, nvtx::Payload{seq});
  } else {
    nvtx::push(nvtx::Kind::Op, text);
  }
  return nullptr;
}

// With record_shapes every op's text differs (its input shapes): formatted per op, as
// emit_nvtx(record_shapes=True) does, "aten::addmm, seq = 12 [[4, 8], ...]".
std::unique_ptr<at::ObserverContext> on_start_with_shapes(const at::RecordFunction& fn) {
  std::string msg = fn.name();
  if (fn.seqNr() >= 0) {
    msg += ", seq = ";
    msg += std::to_string(fn.seqNr());
  }
  append_shapes(msg, fn);
  if (fn.isAsync()) return process_range(nvtx::start(nvtx::Kind::Op, msg.c_str()));
  nvtx::push(nvtx::Kind::Op, msg.c_str());
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (ctx)
    nvtx::end(static_cast<ProcessRange*>(ctx)->id);
  else
    nvtx::pop();
}

}  // namespace

OpRanges::OpRanges(bool record_shapes) {
  if (!nvtx::tool_attached()) return;
  at::RecordFunctionCallback cb(record_shapes ? &on_start_with_shapes : &on_start, &on_end);
  cb.needsInputs(record_shapes)
      .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION});
  handle_ = at::addGlobalCallback(cb);
  registered_ = true;
}

OpRanges::~OpRanges() {
  if (registered_) at::removeCallback(handle_);
}

}  // namespace fathom::detail
