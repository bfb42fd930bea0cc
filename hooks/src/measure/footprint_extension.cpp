#include "measure/footprint_extension.h"

#include <torch/nn/module.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <string>
#include <unordered_set>

#include "base/warning_sink.h"

namespace fathom::detail {
namespace {

std::int64_t bytes_of(const at::Tensor& t) {
  return t.defined() ? static_cast<std::int64_t>(t.nbytes()) : 0;
}

template <typename State>
const State* as(const torch::optim::OptimizerParamState& s) {
  return dynamic_cast<const State*>(&s);
}

// The parameters (their TensorImpls) in the optimizer's groups.
std::unordered_set<const void*> parameters_of(const torch::optim::Optimizer& optimizer) {
  std::unordered_set<const void*> out;
  for (const auto& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params()) out.insert(p.unsafeGetTensorImpl());
  return out;
}

// One state's bytes, or nullopt for a state type fathom does not read.
std::optional<std::int64_t> bytes_of_state(const torch::optim::OptimizerParamState& state) {
  if (auto* s = as<torch::optim::SGDParamState>(state)) return bytes_of(s->momentum_buffer());
  if (auto* s = as<torch::optim::AdamParamState>(state))
    return bytes_of(s->exp_avg()) + bytes_of(s->exp_avg_sq()) + bytes_of(s->max_exp_avg_sq());
  if (auto* s = as<torch::optim::AdamWParamState>(state))
    return bytes_of(s->exp_avg()) + bytes_of(s->exp_avg_sq()) + bytes_of(s->max_exp_avg_sq());
  if (auto* s = as<torch::optim::RMSpropParamState>(state))
    return bytes_of(s->square_avg()) + bytes_of(s->momentum_buffer()) + bytes_of(s->grad_avg());
  if (auto* s = as<torch::optim::AdagradParamState>(state)) return bytes_of(s->sum());
  return std::nullopt;
}

constexpr const char* kKnownStates = "SGD, Adam, AdamW, RMSprop, Adagrad";

}  // namespace

std::optional<std::int64_t> optimizer_state_bytes(const torch::optim::Optimizer& optimizer) {
  std::int64_t total = 0;
  for (const auto& [key, state] : optimizer.state()) {
    if (!state) continue;
    auto bytes = bytes_of_state(*state);
    if (!bytes) return std::nullopt;
    total += *bytes;
  }
  return total;
}

std::optional<std::int64_t> state_bytes_of(const torch::optim::Optimizer& optimizer,
                                           const void* parameter) {
  const auto& states = optimizer.state();
  auto it = states.find(const_cast<void*>(parameter));
  if (it == states.end() || !it->second) return 0;
  return bytes_of_state(*it->second);
}

void FootprintExtension::watch(const void* model, const std::string& name,
                               const std::vector<at::Tensor>& parameters) {
  for (Model& m : models_) {
    if (m.key == model) {
      m.parameters = parameters;  // watched again: its parameters may have changed
      return;
    }
  }
  int same = 1;
  for (const Model& m : models_)
    if (m.name == name || m.name.rfind(name + " #", 0) == 0) ++same;
  models_.push_back({model, same > 1 ? name + " #" + std::to_string(same) : name, parameters});
}

void FootprintExtension::watch(const torch::optim::Optimizer& optimizer) {
  for (const auto* o : optimizers_)
    if (o == &optimizer) return;
  optimizers_.push_back(&optimizer);
}

void FootprintExtension::on_footprint(FootprintParts& parts, Environment& environment) noexcept {
  if (models_.empty()) return;  // no model watched: nothing to say
  try {
    ModelBytes f;
    std::unordered_set<const void*> counted;  // a parameter two models share counts once
    bool readable = true;
    std::int64_t total_state = 0;
    std::vector<std::unordered_set<const void*>> held_by;
    for (const auto* o : optimizers_) {
      held_by.push_back(parameters_of(*o));
      auto bytes = optimizer_state_bytes(*o);
      readable = readable && bytes.has_value();
      total_state += bytes.value_or(0);
    }
    for (const Model& m : models_) {
      ModelFootprint mf;
      mf.name = m.name;
      std::int64_t state = 0;
      bool held = false, model_readable = true;
      for (const at::Tensor& p : m.parameters) {
        mf.parameter_count += p.numel();
        mf.parameter_bytes += bytes_of(p);
        mf.gradient_bytes += bytes_of(p.grad());
        const void* impl = p.unsafeGetTensorImpl();
        if (counted.insert(impl).second) {
          f.parameter_count += p.numel();
          f.parameter_bytes += bytes_of(p);
          f.gradient_bytes += bytes_of(p.grad());
        }
        for (std::size_t i = 0; i < optimizers_.size(); ++i) {
          if (!held_by[i].count(impl)) continue;
          held = true;
          auto bytes = state_bytes_of(*optimizers_[i], impl);
          model_readable = model_readable && bytes.has_value();
          state += bytes.value_or(0);
        }
      }
      if (held && model_readable) mf.optimizer_state_bytes = state;
      f.models.push_back(std::move(mf));
    }
    if (optimizers_.empty() && !said_unwatched_) {
      environment.not_measured.push_back(
          {"optimizer state bytes",
           "no optimizer is watched, so the hardware fit leaves its state out: call "
           "session.watch(optimizer) for each optimizer"});
      said_unwatched_ = true;
    }
    if (!optimizers_.empty() && readable) f.optimizer_state_bytes = total_state;
    if (!readable && !said_unreadable_) {
      environment.not_measured.push_back(
          {"optimizer state bytes", std::string("a watched optimizer's state type is not one "
                                                "fathom reads (") +
                                        kKnownStates + "), so the fit leaves the state out"});
      said_unreadable_ = true;
    }
    parts.model = std::move(f);
  } catch (const std::exception& e) {
    detail::warn("memory footprint not measured: ", e.what());
  }
}

void FootprintExtension::on_watch_model(const torch::nn::Module& model, const std::string& name) {
  watch(&model, name, model.parameters());
}

}  // namespace fathom::detail
