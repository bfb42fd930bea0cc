#pragma once
// Gradient scaling for fp16 training, with the semantics of Python's torch.amp.GradScaler (which
// LibTorch lacks, pytorch issue 44710):
//
//   fathom::GradScaler scaler;  // scale 65536, growth 2, backoff 0.5, interval 2000
//   {
//     fathom::AutocastScope autocast(torch::kCUDA, torch::kHalf);
//     loss = criterion(model->forward(x), y);
//   }
//   scaler.scale(loss).backward();
//   scaler.unscale_(optimizer);  // optional: to clip the real gradients
//   torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
//   scaler.step(optimizer);  // skipped when a gradient holds inf or NaN
//   scaler.update();         // halves the scale after a skip, doubles it after growth_interval
//                            // clean steps
//
// The scale and the inf checks stay on the gradients' device (CPU or CUDA): step() reads one flag
// back, update() none. bf16 needs no scaling (its range is fp32's); construct it disabled then,
// and every call passes straight through.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace torch::optim {
class Optimizer;
}
namespace torch::serialize {
class OutputArchive;
class InputArchive;
}  // namespace torch::serialize

namespace fathom {

class GradScalerOptions {
 public:
  GradScalerOptions() = default;

  GradScalerOptions& init_scale(double v) {
    init_scale_ = v;
    return *this;
  }
  double init_scale() const noexcept { return init_scale_; }
  // Multiplies the scale after growth_interval steps in a row without inf/NaN gradients.
  GradScalerOptions& growth_factor(double v) {
    growth_factor_ = v;
    return *this;
  }
  double growth_factor() const noexcept { return growth_factor_; }
  // Multiplies the scale after a step whose gradients held inf/NaN.
  GradScalerOptions& backoff_factor(double v) {
    backoff_factor_ = v;
    return *this;
  }
  double backoff_factor() const noexcept { return backoff_factor_; }
  GradScalerOptions& growth_interval(std::int64_t v) {
    growth_interval_ = v;
    return *this;
  }
  std::int64_t growth_interval() const noexcept { return growth_interval_; }
  // Disabled: scale() returns its input, step() is optimizer.step(), the rest does nothing.
  GradScalerOptions& enabled(bool v) {
    enabled_ = v;
    return *this;
  }
  bool enabled() const noexcept { return enabled_; }

 private:
  double init_scale_ = 65536.0;
  double growth_factor_ = 2.0;
  double backoff_factor_ = 0.5;
  std::int64_t growth_interval_ = 2000;
  bool enabled_ = true;
};

// What a checkpoint keeps (Python's state_dict(): scale, growth_factor, backoff_factor,
// growth_interval, _growth_tracker).
struct GradScalerState {
  double scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  std::int64_t growth_tracker = 0;  // clean steps in a row since the scale last changed
};

class GradScaler {
 public:
  // Throws fathom::Error when growth_factor <= 1, backoff_factor >= 1 (or <= 0), the initial
  // scale is not positive, or growth_interval < 1.
  explicit GradScaler(GradScalerOptions options = GradScalerOptions());

  // loss * scale (the scale lives on loss's device from the first call).
  at::Tensor scale(const at::Tensor& outputs);
  std::vector<at::Tensor> scale(const std::vector<at::Tensor>& outputs);

  // Divides optimizer's gradients by the scale in place and notes whether any held inf/NaN.
  // At most once per optimizer between update()s, and before step(); throws fathom::Error
  // otherwise, or when a gradient is fp16 (keep master weights in fp32).
  void unscale_(torch::optim::Optimizer& optimizer);

  // Unscales (unless unscale_ ran) and calls optimizer.step() unless a gradient held inf/NaN.
  // Returns whether the optimizer stepped. Once per optimizer between update()s.
  bool step(torch::optim::Optimizer& optimizer);

  // Backs the scale off if any optimizer's gradients held inf/NaN since the last update, grows it
  // after growth_interval clean steps in a row, and starts the next iteration. Throws
  // fathom::Error when no step() or unscale_() ran since the last update.
  void update();
  // Sets the scale to new_scale instead.
  void update(double new_scale);

  // The current scale (1 when disabled); reads it back from the device.
  double get_scale() const;
  std::int64_t growth_tracker() const;
  bool is_enabled() const noexcept { return options_.enabled(); }
  const GradScalerOptions& options() const noexcept { return options_; }
  // Whether a step() since the last update() skipped its optimizer on inf/NaN gradients.
  bool skipped_since_update() const noexcept { return skipped_since_update_; }

  // Save between iterations (after update()); save() throws fathom::Error in mid-iteration.
  // A disabled scaler's state has scale 1; load_state on a disabled scaler does nothing.
  GradScalerState state() const;
  void load_state(const GradScalerState& state);
  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    std::vector<at::Tensor> found_inf;  // one per device the gradients were on
  };
  void lazy_init(const at::Tensor& like);
  void require_scale(const char* call) const;
  void unscale_grads(torch::optim::Optimizer& optimizer, PerOptimizer& state);

  GradScalerOptions options_;
  std::int64_t init_growth_tracker_ = 0;
  at::Tensor scale_;           // float32 scalar, on the first scaled output's device
  at::Tensor growth_tracker_;  // int32 scalar, same device
  std::unordered_map<const torch::optim::Optimizer*, PerOptimizer> per_optimizer_;
  bool skipped_since_update_ = false;
};

// torch::save(scaler, path) / torch::load(scaler, path).
torch::serialize::OutputArchive& operator<<(torch::serialize::OutputArchive& archive,
                                            const GradScaler& scaler);
torch::serialize::InputArchive& operator>>(torch::serialize::InputArchive& archive,
                                           GradScaler& scaler);

}  // namespace fathom
