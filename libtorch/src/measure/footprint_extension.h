#pragma once
// What the watched model holds in memory besides activations: parameters, gradients and
// optimizer state, measured from the tensors themselves at each epoch end, for the report's
// hardware fit: the model's part of the footprint (footprint_parts.h). Activation bytes, the AMP
// and the checkpointing flags are the parts of their own extensions.
#include <torch/optim/optimizer.h>

#include <vector>

#include "session/session_extension.h"

namespace fathom::detail {

class FootprintExtension : public SessionExtension {
 public:
  void watch(const std::vector<at::Tensor>& parameters) { parameters_ = parameters; }
  void watch(const torch::optim::Optimizer& optimizer) { optimizer_ = &optimizer; }
  void on_footprint(FootprintParts& parts, Environment& environment) noexcept override;

 private:
  std::vector<at::Tensor> parameters_;  // shares the model's tensors; no copy of their data
  const torch::optim::Optimizer* optimizer_ = nullptr;
  bool said_unwatched_ = false;  // the not-measured note is written once per run
};

// Bytes of the optimizer's per-parameter state (momentum, Adam moments, ...), or nullopt for
// an optimizer whose state fathom does not know how to read.
std::optional<std::int64_t> optimizer_state_bytes(const torch::optim::Optimizer& optimizer);

}  // namespace fathom::detail
