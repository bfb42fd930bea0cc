#include "measure/footprint_extension.h"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <iostream>

#include "records/warning_sink.h"

namespace fathom::detail {
namespace {

std::int64_t bytes_of(const at::Tensor& t) {
  return t.defined() ? static_cast<std::int64_t>(t.nbytes()) : 0;
}

template <typename State>
const State* as(const torch::optim::OptimizerParamState& s) {
  return dynamic_cast<const State*>(&s);
}

}  // namespace

std::optional<std::int64_t> optimizer_state_bytes(const torch::optim::Optimizer& optimizer) {
  std::int64_t total = 0;
  for (const auto& [key, state] : optimizer.state()) {
    if (!state) continue;
    if (auto* s = as<torch::optim::SGDParamState>(*state)) {
      total += bytes_of(s->momentum_buffer());
    } else if (auto* s = as<torch::optim::AdamParamState>(*state)) {
      total += bytes_of(s->exp_avg()) + bytes_of(s->exp_avg_sq()) + bytes_of(s->max_exp_avg_sq());
    } else if (auto* s = as<torch::optim::AdamWParamState>(*state)) {
      total += bytes_of(s->exp_avg()) + bytes_of(s->exp_avg_sq()) + bytes_of(s->max_exp_avg_sq());
    } else if (auto* s = as<torch::optim::RMSpropParamState>(*state)) {
      total += bytes_of(s->square_avg()) + bytes_of(s->momentum_buffer()) + bytes_of(s->grad_avg());
    } else if (auto* s = as<torch::optim::AdagradParamState>(*state)) {
      total += bytes_of(s->sum());
    } else {
      return std::nullopt;
    }
  }
  return total;
}

void FootprintExtension::on_footprint(FootprintParts& parts, Environment& environment) noexcept {
  if (parameters_.empty()) return;  // no model watched: nothing to say
  try {
    ModelBytes f;
    for (const at::Tensor& p : parameters_) {
      f.parameter_count += p.numel();
      f.parameter_bytes += bytes_of(p);
      f.gradient_bytes += bytes_of(p.grad());
    }
    if (!optimizer_ && !said_unwatched_) {
      environment.not_measured.push_back(
          {"optimizer state bytes",
           "no optimizer is watched, so the hardware fit leaves its state out: call "
           "session.watch(optimizer)"});
      said_unwatched_ = true;
    }
    if (optimizer_) {
      if (auto bytes = optimizer_state_bytes(*optimizer_)) {
        f.optimizer_state_bytes = *bytes;
      } else {
        environment.not_measured.push_back({"optimizer state bytes",
                                            "the optimizer's state type is not one fathom reads "
                                            "(SGD, Adam, AdamW, RMSprop, Adagrad)"});
        optimizer_ = nullptr;  // say it once
      }
    }
    parts.model = f;
  } catch (const std::exception& e) {
    detail::warn("memory footprint not measured: ", e.what());
  }
}

}  // namespace fathom::detail
