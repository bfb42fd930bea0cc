#include "checkpoint/mixed_unit.h"

#include <atomic>
#include <unordered_set>

#include "checkpoint/op_interception.h"
#include "checkpoint/top_level_ops.h"

namespace fathom::detail {

at::Tensor run_mixed_unit(const TensorFunction& forward, const at::Tensor& input,
                          const MixedUnitRun& run,
                          const std::vector<std::shared_ptr<torch::nn::Module>>& modules) {
  // The forward counts its top-level ops (in the checkpoint's recompute too: the policy is asked
  // only in the forward, but the count costs little and keeps one function for both).
  auto counted = [forward](const at::Tensor& x) {
    TopLevelOps ops(x);
    return forward(x);
  };
  // Offloaded groups go whatever their size: the plan chose them for their bytes.
  OffloadOptions offload = run.offload;
  offload.min_bytes(0);
  if (run.recompute) {
    auto kept = std::make_shared<const std::unordered_set<int>>(run.kept.begin(), run.kept.end());
    auto offloaded =
        std::make_shared<const std::unordered_set<int>>(run.offloaded.begin(), run.offloaded.end());
    CheckpointOptions options;
    options.choose([kept, offloaded](const CheckpointedOp&) {
      const TopLevelOps* ops = TopLevelOps::on_this_thread();
      const int at = ops ? ops->current() : -1;
      if (offloaded->count(at)) return OpChoice::Offload;
      return kept->count(at) ? OpChoice::Keep : OpChoice::Recompute;
    });
    options.offload_options(offload);
    options.offload_inputs(run.offload_input);
    for (const auto& m : modules) options.module(m);
    return checkpoint(counted, input, options);
  }
  auto offloaded =
      std::make_shared<const std::unordered_set<int>>(run.offloaded.begin(), run.offloaded.end());
  // Nothing recomputed: its backward fetches one ahead, as the plan's fetch window assumes
  // (activation_plan.h).
  offload.fetch_ahead(1);
  offload.only([offloaded, input = run.offload_input](const at::Tensor& t) {
    const TopLevelOps* ops = TopLevelOps::on_this_thread();
    if (!ops) return false;
    return input && ops->is_input(t) ? true : offloaded->count(ops->charged(t)) > 0;
  });
  return fathom::offload(counted, input, offload);
}

namespace {
std::atomic<double> g_cpu_offload_stand_in{0.0};
}  // namespace

void set_cpu_offload_stand_in(double bytes_per_second) noexcept {
  g_cpu_offload_stand_in.store(bytes_per_second > 0 ? bytes_per_second : 0.0);
}

double cpu_offload_stand_in() noexcept { return g_cpu_offload_stand_in.load(); }

bool selective_checkpointing_available(std::string* why) noexcept {
  return interception_available(why);
}

}  // namespace fathom::detail
