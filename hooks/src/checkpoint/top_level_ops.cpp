#include "checkpoint/top_level_ops.h"

#include "base/warning_sink.h"
#include "measure/saved_tensor_meter.h"

namespace fathom::detail {
namespace {

thread_local TopLevelOps* t_ops = nullptr;

// Only the top-level ops need their outputs: the frame says which ones these are.
struct Frame : at::ObserverContext {
  bool top = false;
  int position = 0;
};

}  // namespace

struct TopLevelOps::Access {
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    TopLevelOps* self = t_ops;
    if (!self || fn.isAsync()) return nullptr;
    auto frame = std::make_unique<Frame>();
    frame->top = self->depth_++ == 0;
    if (frame->top) frame->position = self->started_++;
    return frame;
  }

  static void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
    TopLevelOps* self = t_ops;
    auto* frame = static_cast<Frame*>(ctx);
    if (!self || !frame) return;
    if (self->depth_ > 0) --self->depth_;
    if (!frame->top) return;
    try {
      auto note = [&](const at::Tensor& t) {
        const void* s = storage_of(t).storage;
        if (s && s != self->input_) self->producer_.emplace(s, frame->position);
      };
      for (const c10::IValue& v : fn.outputs()) {
        if (v.isTensor()) {
          note(v.toTensor());
        } else if (v.isTensorList()) {
          for (const at::Tensor& t : v.toTensorVector()) note(t);
        }
      }
    } catch (...) {
      swallowed("checkpoint/top_level_ops.cpp: an op's outputs");
    }
  }
};

TopLevelOps::TopLevelOps(const at::Tensor& input) noexcept
    : outer_(t_ops), input_(storage_of(input).storage) {
  // One at a time: every callback registered on the thread sees every op.
  if (outer_) return;
  try {
    handle_ =
        at::addThreadLocalCallback(at::RecordFunctionCallback(&Access::on_start, &Access::on_end)
                                       .needsOutputs(true)
                                       .scopes({at::RecordScope::FUNCTION}));
    t_ops = this;
  } catch (const std::exception& e) {
    warn("the unit's ops cannot be counted, so its planned choices are not applied: ", e.what());
  }
}

TopLevelOps::~TopLevelOps() {
  if (!handle_) return;
  at::removeCallback(*handle_);
  t_ops = outer_;
}

const TopLevelOps* TopLevelOps::on_this_thread() noexcept { return t_ops; }

bool TopLevelOps::is_input(const at::Tensor& t) const noexcept {
  const void* s = storage_of(t).storage;
  return s && s == input_;
}

int TopLevelOps::charged(const at::Tensor& t) const {
  const void* s = storage_of(t).storage;
  if (!s || s == input_) return -1;
  if (auto it = producer_.find(s); it != producer_.end()) return it->second;
  return current();
}

}  // namespace fathom::detail
