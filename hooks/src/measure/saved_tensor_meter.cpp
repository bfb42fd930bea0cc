#include "measure/saved_tensor_meter.h"

#include <fathom/error.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <mutex>
#include <sstream>

#include "base/warning_sink.h"

namespace fathom::detail {
namespace {

thread_local SavedTensorPacker* tls_packer = nullptr;

// Parameters, and views of them (Linear saves weight.t()), are weights, not activations.
bool is_parameter(const at::Tensor& t) {
  if (t.is_leaf() && t.requires_grad()) return true;
  if (!t.is_view()) return false;
  const at::TensorBase& base = t._base();
  return base.defined() && base.is_leaf() && base.requires_grad();
}

std::string node_name(const std::shared_ptr<torch::autograd::Node>& n) {
  return n ? n->name() : std::string();
}

// SavedVariable makes no in-place check when a hook holds the tensor, so the hook makes it: the
// version counter (shared by every view of the storage) at pack against the one at unpack. The
// message names what SavedVariable's does (the node whose backward needs the tensor, the one that
// made it) and, where the tensor still lives, the in-place op that changed it last.
class VersionCheck {
 public:
  explicit VersionCheck(const at::Tensor& t)
      : counter_(t.unsafeGetTensorImpl()->version_counter()),
        saved_version_(counter_.enabled() ? counter_.current_version() : 0),
        producer_(t.grad_fn()),
        tensor_(t.getIntrusivePtr()),
        leaf_(t.is_leaf()) {}

  void check() const {
    if (!counter_.enabled()) return;  // inference tensors carry no version
    const std::uint32_t now = counter_.current_version();
    if (now == saved_version_) return;
    const std::string consumer = node_name(torch::autograd::get_current_node());
    const std::string producer = node_name(producer_.lock());
    std::string modifier;
    if (auto impl = tensor_.lock()) {
      at::Tensor live(std::move(impl));
      modifier = node_name(live.grad_fn());
      if (modifier == producer) modifier.clear();  // the change was not recorded on this alias
    }
    std::ostringstream m;
    m << "a tensor saved for " << (consumer.empty() ? "backward" : consumer) << " ("
      << (producer.empty() ? "" : "an output of " + producer)
      << (producer.empty() ? (leaf_ ? "a leaf tensor" : "a tensor") : std::string())
      << ") was modified in place after the forward saved it";
    if (!modifier.empty()) m << ", last by " << modifier;
    m << " (version " << now << ", saved at version " << saved_version_
      << "): its gradient would be wrong. Make the in-place op out of place (y = y + 1, not "
         "y.add_(1)), or change a clone() of the tensor";
    throw Error(m.str());
  }

 private:
  c10::VariableVersion counter_;
  std::uint32_t saved_version_;
  std::weak_ptr<torch::autograd::Node> producer_;
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> tensor_;
  bool leaf_;
};

// One saved tensor under fathom's hook: every packer of the thread observes it, the innermost
// that takes it holds it, and when none does it is kept as SavedVariable would keep it
// (detached: holding the output of the node that saves it with its grad_fn would make a
// reference cycle).
class PackerHooks final : public torch::autograd::SavedVariableHooks {
 public:
  explicit PackerHooks(SavedTensorPacker* innermost) : innermost_(innermost) {}
  void call_pack_hook(const at::Tensor& tensor) override {
    const bool parameter = is_parameter(tensor);
    for (SavedTensorPacker* p = innermost_; p; p = p->outer()) p->observe(tensor, parameter);
    check_.emplace(tensor);
    for (SavedTensorPacker* p = innermost_; p && !packed_; p = p->outer())
      packed_ = p->pack(tensor, parameter);
    if (!packed_) kept_ = tensor.detach();
  }
  at::Tensor call_unpack_hook() override {
    if (check_) check_->check();
    return packed_ ? packed_->unpack() : kept_;
  }

 private:
  SavedTensorPacker* innermost_;  // only read while packing, when it is alive
  std::optional<VersionCheck> check_;
  std::unique_ptr<SavedTensorPacker::Packed> packed_;
  at::Tensor kept_;
};

class PackingEngine final : public torch::autograd::Engine {
 public:
  PackingEngine() = default;
  std::unique_ptr<torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks() override {
    if (SavedTensorPacker* p = tls_packer; p && p->active())
      return std::make_unique<PackerHooks>(p);
    return nullptr;
  }
};

PackingEngine* packing_engine = nullptr;
torch::autograd::Engine& packing_engine_stub() { return *packing_engine; }

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
      packing_engine = new PackingEngine();
      torch::autograd::set_default_engine_stub(&packing_engine_stub);
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

bool SavedTensorPacker::available(std::string* why) noexcept {
  const Install& i = install();
  if (!i.ok && why) *why = i.why;
  return i.ok;
}

SavedTensorPacker::SavedTensorPacker() noexcept : outer_(tls_packer), active_(available()) {
  tls_packer = this;
}

SavedTensorPacker::~SavedTensorPacker() { tls_packer = outer_; }

SavedTensorPacker* SavedTensorPacker::innermost() noexcept { return tls_packer; }

void SavedTensorCapture::observe(const at::Tensor& tensor, bool parameter) noexcept {
  if (!parameter) record(tensor);
}

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
