#include "measure/saved_tensor_meter.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <mutex>

#include "records/warning_sink.h"

namespace fathom::detail {
namespace {

thread_local SavedTensorCapture* tls_capture = nullptr;

// Parameters, and views of them (Linear saves weight.t()), are weights, not activations.
bool is_parameter(const at::Tensor& t) {
  if (t.is_leaf() && t.requires_grad()) return true;
  if (!t.is_view()) return false;
  const at::TensorBase& base = t._base();
  return base.defined() && base.is_leaf() && base.requires_grad();
}

// Keeps the tensor as SavedVariable would have (detached: holding the output of the node that
// saves it with its grad_fn would make a reference cycle) and records its storage.
class RecordingHooks final : public torch::autograd::SavedVariableHooks {
 public:
  explicit RecordingHooks(SavedTensorCapture* capture) : capture_(capture) {}
  void call_pack_hook(const at::Tensor& tensor) override {
    // Captures nest (a block inside a chain inside a test): each one sees what is saved inside it.
    if (!is_parameter(tensor))
      for (SavedTensorCapture* c = capture_; c; c = c->outer()) c->record(tensor);
    kept_ = tensor.detach();
  }
  at::Tensor call_unpack_hook() override { return kept_; }

 private:
  SavedTensorCapture* capture_;
  at::Tensor kept_;
};

class MeteringEngine final : public torch::autograd::Engine {
 public:
  MeteringEngine() = default;
  std::unique_ptr<torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks() override {
    if (SavedTensorCapture* c = tls_capture; c && c->active())
      return std::make_unique<RecordingHooks>(c);
    return nullptr;
  }
};

MeteringEngine* metering_engine = nullptr;
torch::autograd::Engine& metering_engine_stub() { return *metering_engine; }

struct Install {
  bool ok = false;
  std::string why;
};

const Install& install() {
  static const Install result = [] {
    Install r;
    try {
      auto& current = torch::autograd::Engine::get_default_engine();
      if (&current != &torch::autograd::Engine::get_base_engine()) {
        r.why =
            "another autograd engine is the default (Python's?): saved-tensor bytes need "
            "fathom's engine hook, which only replaces LibTorch's base engine";
        return r;
      }
      // Leaked on purpose, like the base engine's worker threads: it must outlive every backward.
      metering_engine = new MeteringEngine();
      torch::autograd::set_default_engine_stub(&metering_engine_stub);
      r.ok = true;
    } catch (const std::exception& e) {
      r.why = std::string("installing the autograd engine hook failed: ") + e.what();
    }
    return r;
  }();
  return result;
}

}  // namespace

SavedTensorCapture::Saved storage_of(const at::Tensor& t) noexcept {
  if (!t.defined() || !t.has_storage()) return {nullptr, 0};
  const c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  return {s, static_cast<std::int64_t>(s->nbytes())};
}

bool SavedTensorCapture::available(std::string* why) noexcept {
  const Install& i = install();
  if (!i.ok && why) *why = i.why;
  return i.ok;
}

SavedTensorCapture::SavedTensorCapture() noexcept : outer_(tls_capture), active_(available()) {
  tls_capture = this;
}

SavedTensorCapture::~SavedTensorCapture() { tls_capture = outer_; }

void SavedTensorCapture::record(const at::Tensor& t) noexcept {
  const Saved s = storage_of(t);
  if (!s.storage) return;
  try {
    if (index_.emplace(s.storage, saved_.size()).second) {
      saved_.push_back(s);
      total_ += s.bytes;
    }
  } catch (...) {  // out of host memory while profiling: lose the measurement, not the step
    detail::swallowed("measure/saved_tensor_meter.cpp");
  }
}

}  // namespace fathom::detail
