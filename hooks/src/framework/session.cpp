// The public Session's members (<fathom/session.h>) past its constructor: the epoch, the report,
// and what the loop watches, handed to every extension. The constructor, which builds the
// features, is the composition root's (session/session_features.cpp).
#include <fathom/report.h>
#include <fathom/session.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "framework/module_type_name.h"
#include "framework/session_extension.h"
#include "framework/session_state.h"

namespace fathom {

using detail::SessionState;

Session::~Session() = default;

EpochScope Session::epoch() noexcept { return EpochScope(state_.get()); }

bool Session::active() const noexcept { return state_ != nullptr; }

const Options& Session::options() const noexcept {
  return state_ ? state_->options() : off_options_;
}

const RunReport& Session::report() const noexcept {
  static const RunReport empty;
  return state_ ? state_->report() : empty;
}

std::string Session::report_path() const { return state_ ? state_->report_path() : std::string(); }

void Session::flush_report() noexcept {
  if (state_) state_->flush_report();
}

namespace {

std::string short_type(const std::string& name) { return detail::short_type_name(name); }

}  // namespace

void Session::watch(const torch::nn::Module& model) {
  if (!state_) return;
  const std::string root = short_type(model.name());
  state_->watch_module(&model, root);
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    state_->watch_module(item.value().get(),
                         item.key() + " (" + short_type(item.value()->name()) + ")");
  }
  state_->each_extension([&](detail::SessionExtension& e) { e.on_watch_model(model, root); });
}

void Session::watch_parameters(const void* key, const std::string& name,
                               const std::vector<at::Tensor>& parameters) {
  if (!state_) return;
  state_->each_extension(
      [&](detail::SessionExtension& e) { e.on_watch_parameters(key, name, parameters); });
}

void Session::watch(const torch::optim::Optimizer& optimizer) {
  if (!state_) return;
  state_->each_extension([&](detail::SessionExtension& e) { e.on_watch_optimizer(optimizer); });
}

}  // namespace fathom
