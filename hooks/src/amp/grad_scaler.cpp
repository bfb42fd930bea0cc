#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>
#include <ATen/ops/full.h>
#include <c10/core/GradMode.h>
#include <fathom/error.h>
#include <fathom/grad_scaler.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <map>
#include <string>
#include <unordered_map>
#include <utility>

namespace fathom {
namespace {

// Copies of one scalar tensor per device, made once each (Python's _MultiDeviceReplicator).
class PerDevice {
 public:
  explicit PerDevice(at::Tensor master) : master_(std::move(master)) {}
  at::Tensor& get(c10::Device d) {
    auto it = copies_.find(d);
    if (it == copies_.end()) {
      at::Tensor t =
          d == master_.device() ? master_ : master_.to(d, /*non_blocking=*/true, /*copy=*/true);
      it = copies_.emplace(d, std::move(t)).first;
    }
    return it->second;
  }
  std::vector<at::Tensor> all() const {
    std::vector<at::Tensor> out;
    for (const auto& [d, t] : copies_) out.push_back(t);
    return out;
  }

 private:
  at::Tensor master_;
  std::unordered_map<c10::Device, at::Tensor> copies_;
};

const char* const kScaleFirst =
    "call scaler.scale(loss) and backward() on the result first, in this iteration";

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  if (!options_.enabled()) return;
  if (!(options_.growth_factor() > 1.0))
    throw Error("GradScaler growth_factor must be > 1, got " +
                std::to_string(options_.growth_factor()));
  if (!(options_.backoff_factor() > 0.0 && options_.backoff_factor() < 1.0))
    throw Error("GradScaler backoff_factor must be in (0, 1), got " +
                std::to_string(options_.backoff_factor()));
  if (!(options_.init_scale() > 0.0))
    throw Error("GradScaler init_scale must be > 0, got " + std::to_string(options_.init_scale()));
  if (options_.growth_interval() < 1)
    throw Error("GradScaler growth_interval must be >= 1, got " +
                std::to_string(options_.growth_interval()));
}

void GradScaler::lazy_init(const at::Tensor& like) {
  const auto device = like.device();
  scale_ =
      at::full({}, options_.init_scale(), at::TensorOptions().dtype(at::kFloat).device(device));
  growth_tracker_ =
      at::full({}, init_growth_tracker_, at::TensorOptions().dtype(at::kInt).device(device));
}

void GradScaler::require_scale(const char* call) const {
  if (!scale_.defined())
    throw Error(std::string("GradScaler::") + call + " before any scale(): " + kScaleFirst);
}

at::Tensor GradScaler::scale(const at::Tensor& outputs) {
  if (!options_.enabled()) return outputs;
  if (!scale_.defined()) lazy_init(outputs);
  return outputs * scale_.to(outputs.device(), /*non_blocking=*/true);
}

std::vector<at::Tensor> GradScaler::scale(const std::vector<at::Tensor>& outputs) {
  if (!options_.enabled() || outputs.empty()) return outputs;
  if (!scale_.defined()) lazy_init(outputs.front());
  PerDevice scales(scale_);
  std::vector<at::Tensor> out;
  out.reserve(outputs.size());
  for (const at::Tensor& t : outputs) out.push_back(t * scales.get(t.device()));
  return out;
}

void GradScaler::unscale_grads(torch::optim::Optimizer& optimizer, PerOptimizer& state) {
  // The reciprocal in double, as PyTorch does, so 1/scale is exact for powers of two and close
  // otherwise.
  PerDevice inv_scale(scale_.to(at::kDouble).reciprocal().to(at::kFloat));
  PerDevice found_inf(
      at::full({}, 0.0, at::TensorOptions().dtype(at::kFloat).device(scale_.device())));
  // Gradients grouped by device and dtype: the foreach kernel takes one of each per call.
  std::unordered_map<c10::Device, std::map<c10::ScalarType, std::vector<at::Tensor>>> grads;
  c10::NoGradGuard no_grad;
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) {
      if (!param.grad().defined()) continue;
      if (param.grad().scalar_type() == at::kHalf)
        throw Error(
            "GradScaler cannot unscale fp16 gradients: keep the parameters (master weights) in "
            "fp32 "
            "and let autocast cast them in the forward pass");
      at::Tensor to_unscale = param.grad();
      if (to_unscale.is_sparse()) to_unscale = to_unscale._values();
      grads[to_unscale.device()][to_unscale.scalar_type()].push_back(to_unscale);
    }
  }
  for (auto& [device, by_dtype] : grads) {
    for (auto& [dtype, list] : by_dtype) {
      at::_amp_foreach_non_finite_check_and_unscale_(list, found_inf.get(device),
                                                     inv_scale.get(device));
    }
  }
  state.found_inf = found_inf.all();
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled()) return;
  require_scale("unscale_");
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::Unscaled)
    throw Error(
        "GradScaler::unscale_ was already called for this optimizer in this iteration: call it "
        "once, after backward() and before step(); update() starts the next iteration");
  if (state.stage == Stage::Stepped)
    throw Error(
        "GradScaler::unscale_ after step() for this optimizer: unscale before step(), then "
        "update()");
  unscale_grads(optimizer, state);
  state.stage = Stage::Unscaled;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled()) {
    optimizer.step();
    return true;
  }
  require_scale("step");
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::Stepped)
    throw Error(
        "GradScaler::step was already called for this optimizer in this iteration: call update() "
        "after the step of every optimizer");
  if (state.stage == Stage::Ready) unscale_(optimizer);
  if (state.found_inf.empty())
    throw Error("GradScaler::step found no gradient in the optimizer's parameters: " +
                std::string(kScaleFirst));
  double inf = 0;
  for (const at::Tensor& f : state.found_inf) inf += f.item<double>();
  state.stage = Stage::Stepped;
  if (inf != 0) {
    skipped_since_update_ = true;
    return false;
  }
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!options_.enabled()) return;
  require_scale("update");
  std::vector<at::Tensor> found;
  for (auto& [opt, state] : per_optimizer_)
    for (const at::Tensor& f : state.found_inf)
      found.push_back(f.to(scale_.device(), /*non_blocking=*/true));
  if (found.empty())
    throw Error(
        "GradScaler::update found no inf check since the last update(): call step(optimizer) (or "
        "unscale_) first");
  at::Tensor combined = found.front();
  for (std::size_t i = 1; i < found.size(); ++i) combined = combined + found[i];
  at::_amp_update_scale_(scale_, growth_tracker_, combined, options_.growth_factor(),
                         options_.backoff_factor(), options_.growth_interval());
  per_optimizer_.clear();
  skipped_since_update_ = false;
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled()) return;
  require_scale("update");
  scale_.fill_(new_scale);
  per_optimizer_.clear();
  skipped_since_update_ = false;
}

double GradScaler::get_scale() const {
  if (!options_.enabled()) return 1.0;
  return scale_.defined() ? scale_.item<double>() : options_.init_scale();
}

std::int64_t GradScaler::growth_tracker() const {
  if (!options_.enabled()) return 0;
  return growth_tracker_.defined() ? growth_tracker_.item<std::int64_t>() : init_growth_tracker_;
}

GradScalerState GradScaler::state() const {
  return GradScalerState{get_scale(), options_.growth_factor(), options_.backoff_factor(),
                         options_.growth_interval(), growth_tracker()};
}

void GradScaler::load_state(const GradScalerState& s) {
  if (!options_.enabled()) return;
  options_.init_scale(s.scale)
      .growth_factor(s.growth_factor)
      .backoff_factor(s.backoff_factor)
      .growth_interval(s.growth_interval);
  init_growth_tracker_ = s.growth_tracker;
  if (scale_.defined()) scale_.fill_(s.scale);
  if (growth_tracker_.defined()) growth_tracker_.fill_(s.growth_tracker);
}

void GradScaler::save(torch::serialize::OutputArchive& archive) const {
  if (!per_optimizer_.empty())
    throw Error("GradScaler::save in mid-iteration: save after update() (or before scale())");
  const GradScalerState s = state();
  archive.write("enabled", c10::IValue(options_.enabled()));
  archive.write("scale", c10::IValue(s.scale));
  archive.write("growth_factor", c10::IValue(s.growth_factor));
  archive.write("backoff_factor", c10::IValue(s.backoff_factor));
  archive.write("growth_interval", c10::IValue(s.growth_interval));
  archive.write("growth_tracker", c10::IValue(s.growth_tracker));
}

void GradScaler::load(torch::serialize::InputArchive& archive) {
  auto read = [&](const char* key) {
    c10::IValue v;
    archive.read(key, v);
    return v;
  };
  if (!read("enabled").toBool()) {
    if (options_.enabled())
      throw Error(
          "the saved GradScaler state comes from a disabled scaler: it holds no scale to load");
    return;
  }
  GradScalerState s;
  s.scale = read("scale").toDouble();
  s.growth_factor = read("growth_factor").toDouble();
  s.backoff_factor = read("backoff_factor").toDouble();
  s.growth_interval = read("growth_interval").toInt();
  s.growth_tracker = read("growth_tracker").toInt();
  load_state(s);
}

torch::serialize::OutputArchive& operator<<(torch::serialize::OutputArchive& archive,
                                            const GradScaler& scaler) {
  scaler.save(archive);
  return archive;
}

torch::serialize::InputArchive& operator>>(torch::serialize::InputArchive& archive,
                                           GradScaler& scaler) {
  scaler.load(archive);
  return archive;
}

}  // namespace fathom
