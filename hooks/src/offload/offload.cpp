// fathom::offload: the packer that hands a unit's saved tensors to its OffloadUnit, and the hooks
// that start their way back (offload.h, offload_unit.h).
#include <fathom/error.h>
#include <fathom/offload.h>
#include <torch/autograd.h>

#include <string>

#include "measure/saved_tensor_meter.h"
#include "offload/offload_unit.h"

namespace fathom {
namespace detail {
namespace {

// The unit that ran last on this thread: the one whose tensors come back when this one's backward
// begins (units run forward in order, backward in reverse).
thread_local std::weak_ptr<OffloadUnit> last_unit;

}  // namespace

// The saved tensors of one unit's forward, on the forward's thread. Parameters stay: they live
// on the device for the optimizer anyway.
class OffloadScope::Packer final : public SavedTensorPacker {
 public:
  explicit Packer(std::shared_ptr<OffloadUnit> unit) : unit_(std::move(unit)) {}
  std::unique_ptr<Packed> pack(const at::Tensor& tensor, bool parameter) override {
    if (parameter) return nullptr;
    return unit_->pack(tensor);
  }

 private:
  std::shared_ptr<OffloadUnit> unit_;
};

OffloadScope::OffloadScope(const OffloadOptions& options) {
  std::shared_ptr<OffloadMeterState> meter =
      options.meter() ? options.meter()->state() : std::make_shared<OffloadMeterState>();
  unit_ = std::make_shared<OffloadUnit>(options, meter, last_unit);
  last_unit = unit_;
  {
    std::lock_guard<std::mutex> lock(meter->mu);
    ++meter->totals.calls;
  }
  packer_ = std::make_unique<Packer>(unit_);
  if (!packer_->active()) {
    std::string why;
    SavedTensorPacker::available(&why);
    unit_->fall_back("fathom's autograd-engine hook is not installed: " + why);
  }
}

OffloadScope::~OffloadScope() = default;

void OffloadScope::finish(const std::vector<at::Tensor>& outputs) {
  packer_.reset();
  unit_->end_forward();
  for (const at::Tensor& out : outputs)
    if (out.defined() && out.requires_grad())
      out.register_hook([unit = unit_](const at::TensorBase&) { unit->on_backward_begin(); });
}

}  // namespace detail

OffloadMeter::OffloadMeter() : state_(std::make_shared<detail::OffloadMeterState>()) {}

OffloadSummary OffloadMeter::summary() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->resolve(/*wait=*/true);
  return state_->totals;
}

std::vector<at::Tensor> detail::offload_tensors(const OffloadFunction& fn,
                                                const std::vector<at::Tensor>& inputs,
                                                const OffloadOptions& options) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw Error("fathom::offload: input " + std::to_string(i) +
                  " is undefined; pass defined tensors (non-tensor arguments go in the function's "
                  "captures)");
  }
  if (!fn) throw Error("fathom::offload: the function is empty");
  if (options.min_bytes() < 0)
    throw Error("fathom::offload: OffloadOptions::min_bytes is " +
                std::to_string(options.min_bytes()) + "; give 0 or more bytes");
  if (!at::GradMode::is_enabled()) return fn(inputs);  // nothing is saved
  OffloadScope scope(options);
  std::vector<at::Tensor> outputs = fn(inputs);
  // The unit's backward begins when the gradient of one of its outputs is ready.
  scope.finish(outputs);
  return outputs;
}

at::Tensor offload(const std::function<at::Tensor(const at::Tensor&)>& fn, const at::Tensor& input,
                   const OffloadOptions& options) {
  if (!fn) throw Error("fathom::offload: the function is empty");
  auto outputs = detail::offload_tensors(
      [&fn](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{fn(in[0])}; },
      std::vector<at::Tensor>{input}, options);
  return outputs.at(0);
}

}  // namespace fathom
