#pragma once
// What the watched models hold in memory besides activations: parameters, gradients and
// optimizer state, measured from the tensors themselves at each epoch end, for the report's
// hardware fit: the model's part of the footprint (footprint_parts.h). Every watched model and
// optimizer counts (a GAN's generator, discriminator and their two Adams): the totals add them up,
// and each model gets its share, the optimizer state attributed through the parameters it holds.
// Activation bytes, the AMP and the checkpointing flags are the parts of their own extensions.
#include <torch/optim/optimizer.h>

#include <string>
#include <vector>

#include "framework/session_extension.h"

namespace fathom::detail {

class FootprintExtension : public SessionExtension {
 public:
  // A model or optimizer watched twice counts once.
  void watch(const void* model, const std::string& name, const std::vector<at::Tensor>& parameters);
  void watch(const torch::optim::Optimizer& optimizer);
  void on_watch_model(const torch::nn::Module& model, const std::string& name) override;
  void on_watch_parameters(const void* key, const std::string& name,
                           const std::vector<at::Tensor>& parameters) override {
    watch(key, name, parameters);
  }
  void on_watch_optimizer(const torch::optim::Optimizer& optimizer) override { watch(optimizer); }
  void on_footprint(FootprintParts& parts, Environment& environment) noexcept override;

 private:
  struct Model {
    const void* key;
    std::string name;
    std::vector<at::Tensor> parameters;  // shares the model's tensors; no copy of their data
  };
  std::vector<Model> models_;
  std::vector<const torch::optim::Optimizer*> optimizers_;
  bool said_unwatched_ = false;  // each not-measured note is written once per run
  bool said_unreadable_ = false;
};

// Bytes of the optimizer's per-parameter state (momentum, Adam moments, ...), or nullopt for
// an optimizer whose state fathom does not know how to read.
std::optional<std::int64_t> optimizer_state_bytes(const torch::optim::Optimizer& optimizer);

// The same for one parameter's state (keyed by its TensorImpl, as LibTorch keys it): 0 when the
// optimizer holds none for it yet (before its first step), nullopt for an unknown state type.
std::optional<std::int64_t> state_bytes_of(const torch::optim::Optimizer& optimizer,
                                           const void* parameter);

}  // namespace fathom::detail
