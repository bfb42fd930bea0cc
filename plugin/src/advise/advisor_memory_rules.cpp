// Rules on device memory: near capacity, hardware fit, and room for a larger batch.
#include <fathom/hardware_fit.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "advise/advisor_rules.h"
#include "analyze/fit_hardware.h"
#include "base/bytes_text.h"
#include "base/thresholds.h"

namespace fathom::advice {
namespace {

constexpr const char* kMemoryFix =
    "// let fathom checkpoint activations and enable mixed precision:\n"
    "fathom::Session session(fathom::Options().mode(fathom::Mode::Auto));\n"
    "// or halve the batch and accumulate gradients to keep the effective batch size:\n"
    "optimizer.zero_grad();\n"
    "for (int half = 0; half < 2; ++half) {\n"
    "  auto [x, y] = next_half_batch();\n"
    "  (criterion(model->forward(x), y) / 2).backward();\n"
    "}\n"
    "optimizer.step();";

std::string variant_name(const FitVariant& v) {
  std::string s = v.mixed_precision ? "mixed precision" : "fp32";
  s += v.checkpointing ? " + checkpointing" : "";
  return v.as_run ? s + " (as run)" : s;
}

}  // namespace

void memory_near_capacity(const EpochSummary& e, const Environment& env,
                          std::vector<Finding>& out) {
  const auto m = device_memory_share(e, env);
  const std::int64_t ooms = e.device_memory ? e.device_memory->ooms : 0;
  if (!m) return;
  if (m->share <= thresholds::kDeviceMemoryShare && ooms == 0) return;
  Finding f = make_finding(finding_id::kMemoryNearCapacity,
                           ooms > 0 ? Severity::Critical : Severity::Warning,
                           ooms > 0 ? "Device memory ran out" : "Device memory is nearly full");
  f.evidence = {{"peak used", bytes_text(m->used)},
                {"device memory", bytes_text(m->total)},
                {"share", percent(m->share)},
                {"measured as", m->source},
                {"threshold", percent(thresholds::kDeviceMemoryShare)}};
  if (e.device_memory) {
    f.evidence.push_back({"allocator retries", fmt::format("{}", e.device_memory->alloc_retries)});
    f.evidence.push_back({"out-of-memory errors", fmt::format("{}", ooms)});
  }
  f.why =
      "A larger batch or model will not fit, and allocator retries free and re-allocate the cache "
      "(slow). Checkpointing trades recompute for activation memory; mixed precision halves "
      "activations; a smaller batch with gradient accumulation keeps the math the same.";
  f.estimated_gain = "room for a larger batch; fewer allocator retries";
  f.fix = kMemoryFix;
  out.push_back(std::move(f));
}

void hardware_fit_rule(const EpochSummary& e, const Environment& env, std::vector<Finding>& out) {
  const std::optional<HardwareFit> fitted = epoch_hardware_fit(e, env);
  if (!fitted) return;
  const HardwareFit& fit = *fitted;
  const auto m = device_memory_share(e, env);
  const std::int64_t ooms = e.device_memory ? e.device_memory->ooms : 0;
  const FitVariant& as_run = fit.variants.front();
  const std::int64_t capacity = m ? m->total : env.device_memory_bytes.value_or(0);
  const bool as_run_tight =
      as_run.need_bytes && capacity > 0 && fit_on(*as_run.need_bytes, capacity) != Fit::Fits;
  if (!(ooms > 0 || (m && m->share > thresholds::kDeviceMemoryShare) || as_run_tight)) return;

  Finding f =
      make_finding(finding_id::kHardwareFit, ooms > 0 ? Severity::Critical : Severity::Warning,
                   "The run barely fits this card: what it needs elsewhere");
  if (capacity > 0) f.evidence.push_back({"this device", bytes_text(capacity)});
  const FitVariant* best = nullptr;
  for (const FitVariant& v : fit.variants) {
    if (!v.need_bytes) {
      f.evidence.push_back({variant_name(v), "not estimated: " + v.why});
      continue;
    }
    std::string cards;
    for (std::size_t i = 0; i < v.cards.size(); ++i) {
      if (v.cards[i] == Fit::DoesNotFit) continue;
      cards += (cards.empty() ? "" : ", ") + std::string(kFitCards[i].label) +
               (v.cards[i] == Fit::Tight ? " (tight)" : "");
    }
    // A CPU run compares no card (GPU sizes say nothing about it): the need alone.
    f.evidence.push_back(
        {variant_name(v), !fit.cards_compared
                              ? "needs " + bytes_text(*v.need_bytes)
                              : fmt::format("needs {}; fits {}", bytes_text(*v.need_bytes),
                                            cards.empty() ? "none of 24/40/80/141 GB" : cards)});
    if (!v.as_run && capacity > 0 && fit_on(*v.need_bytes, capacity) == Fit::Fits &&
        (!best || *v.need_bytes > *best->need_bytes))
      best = &v;  // the variant that fits with the least change: the largest need that still fits
  }
  f.why = fmt::format(
      "From measured parameters ({}), gradients ({}), optimizer state ({}) and activations ({}); "
      "overhead {} ({}), allocator fragmentation x{:.2f}.",
      bytes_text(e.footprint->parameter_bytes), bytes_text(e.footprint->gradient_bytes),
      e.footprint->optimizer_state_bytes ? bytes_text(*e.footprint->optimizer_state_bytes)
                                         : std::string("not measured, left out"),
      e.footprint->activation_bytes ? bytes_text(*e.footprint->activation_bytes)
                                    : std::string("not measured"),
      bytes_text(fit.overhead_bytes), fit.overhead_measured ? "measured" : "assumed",
      fit.fragmentation);
  if (best) {
    f.estimated_gain = fmt::format("{} of headroom on this device with {}",
                                   bytes_text(capacity - *best->need_bytes), variant_name(*best));
    f.fix =
        best->mixed_precision && !as_run.mixed_precision &&
                !(best->checkpointing && !as_run.checkpointing)
            ? "fathom::Session session(fathom::Options().mode(fathom::Mode::Auto));  // mixed "
              "precision\n"
              "// or by hand: at::autocast::set_autocast_enabled(at::kCUDA, true) around forward"
            : "fathom::Session session(fathom::Options().mode(fathom::Mode::Auto));  // "
              "checkpointing\n"
              "// fathom plans which blocks to recompute from the measured activations";
  } else {
    f.estimated_gain =
        "no variant fits this device with headroom: a larger card or a smaller batch";
    f.fix = kMemoryFix;
  }
  out.push_back(std::move(f));
}

void batch_headroom(const EpochSummary& e, const Environment& env, std::vector<Finding>& out) {
  const auto m = device_memory_share(e, env);
  const auto busy = gpu_busy_share(e);
  if (!m || !busy) return;
  if (m->share >= thresholds::kIdleMemoryShare || busy->share >= thresholds::kGpuBusyShareLow)
    return;
  Finding f = make_finding(finding_id::kBatchHeadroom, Severity::Info,
                           "GPU and its memory are both mostly idle: try a larger batch");
  f.evidence = {
      {"GPU busy", percent(busy->share)},
      {"GPU busy measured as", busy->source},
      {"peak memory",
       fmt::format("{} of {} ({})", bytes_text(m->used), bytes_text(m->total), percent(m->share))},
      {"thresholds", fmt::format("busy < {}, memory < {}", percent(thresholds::kGpuBusyShareLow),
                                 percent(thresholds::kIdleMemoryShare))}};
  f.why =
      "Each step pays fixed costs (launches, syncs, the optimizer) however small the batch; a "
      "larger "
      "batch spreads them over more samples while memory allows it.";
  f.estimated_gain = fmt::format("up to {} of GPU time is idle now", percent(1.0 - busy->share));
  f.fix =
      "// twice the batch; scale the learning rate with it (linear scaling rule)\n"
      "torch::data::DataLoaderOptions().batch_size(2 * bs);\n"
      "torch::optim::AdamOptions(2 * lr);";
  out.push_back(std::move(f));
}

void checkpoint_plans(const EpochSummary& e, std::vector<Finding>& out) {
  if (!e.modules) return;
  using detail::bytes_text;
  for (const CheckpointPlanReport& p : e.modules->plans) {
    Finding f = make_finding(
        finding_id::kActivationCheckpointing, p.feasible ? Severity::Warning : Severity::Critical,
        (p.applied ? "fathom checkpoints activations of " : "Checkpoint activations of ") +
            p.chain);
    f.evidence = {{"activation peak without checkpointing", bytes_text(p.unconstrained_peak_bytes)},
                  {"activation budget", bytes_text(p.budget_bytes) + " (" + p.budget + ")"},
                  {"predicted activation peak", bytes_text(p.predicted_peak_bytes)},
                  {"recompute per step",
                   fmt::format(fmt::runtime(p.recompute_ms < 10 ? "{:.3f} ms" : "{:.1f} ms"),
                               p.recompute_ms)}};
    f.why = p.message;
    f.estimated_gain =
        bytes_text(std::max<std::int64_t>(0, p.unconstrained_peak_bytes - p.predicted_peak_bytes)) +
        " less activation memory";
    f.fix = p.code;
    f.applied = p.applied;
    out.push_back(std::move(f));
  }
}

}  // namespace fathom::advice

namespace fathom {

std::optional<ActivationTarget> checkpoint_activation_target(
    std::int64_t activation_bytes, std::optional<std::int64_t> step_peak_bytes,
    std::optional<std::int64_t> device_memory_bytes, const std::optional<MemoryBudget>& budget) {
  if (activation_bytes <= 0) return std::nullopt;
  if (device_memory_bytes) {
    const std::int64_t limit =
        budget ? budget->resolve(*device_memory_bytes)
               : static_cast<std::int64_t>(thresholds::kDeviceMemoryShare *
                                           static_cast<double>(*device_memory_bytes));
    if (!step_peak_bytes || *step_peak_bytes <= limit) return std::nullopt;
    // What does not depend on the plan stays; the activations must give up the excess.
    return ActivationTarget{
        activation_bytes - (*step_peak_bytes - limit),
        budget ? memory_budget_text(*budget)
               : fmt::format("{:.0f} % of device memory", 100 * thresholds::kDeviceMemoryShare)};
  }
  if (!budget) return std::nullopt;
  const std::int64_t target = budget->is_fraction()
                                  ? static_cast<std::int64_t>(budget->fraction_of_whole() *
                                                              static_cast<double>(activation_bytes))
                                  : budget->byte_count();
  if (activation_bytes <= target) return std::nullopt;
  // A CPU has no device memory: a fraction is of the activations without checkpointing.
  return ActivationTarget{target, budget->is_fraction()
                                      ? fmt::format("{} % of the activations (CPU)",
                                                    std::lround(budget->fraction_of_whole() * 100))
                                      : memory_budget_text(*budget) + " of activations (CPU)"};
}

}  // namespace fathom
