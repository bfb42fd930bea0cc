#include "analyze/fit_hardware.h"

#include <fathom/report.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "base/thresholds.h"

namespace fathom {
namespace {

// Activations under checkpointing of n blocks in sqrt(n) segments: every segment keeps its
// input (sqrt(n) of n blocks' worth) and one segment is live again during its recompute
// (another sqrt(n) of n): about 2 / sqrt(n) of the plain run (Chen et al., 2016).
double checkpoint_factor(std::int64_t blocks) {
  if (blocks <= 1) return 1.0;
  return std::min(1.0, 2.0 / std::sqrt(static_cast<double>(blocks)));
}

}  // namespace

Fit fit_on(std::int64_t need_bytes, std::int64_t capacity_bytes) noexcept {
  if (need_bytes > capacity_bytes) return Fit::DoesNotFit;
  if (need_bytes > thresholds::kDeviceMemoryShare * static_cast<double>(capacity_bytes))
    return Fit::Tight;
  return Fit::Fits;
}

HardwareFit hardware_fit(const MemoryFootprint& m, const std::optional<DeviceMemoryPeak>& peak,
                         std::optional<std::int64_t> device_used_bytes) {
  HardwareFit out;
  if (peak && peak->peak_allocated_bytes > 0)
    out.fragmentation = std::max(1.0, static_cast<double>(peak->peak_reserved_bytes) /
                                          static_cast<double>(peak->peak_allocated_bytes));
  if (peak && device_used_bytes && *device_used_bytes > peak->peak_reserved_bytes) {
    out.overhead_bytes = *device_used_bytes - peak->peak_reserved_bytes;
    out.overhead_measured = true;
  } else {
    out.overhead_bytes = thresholds::kAssumedRuntimeOverheadBytes;
  }
  const double fixed = static_cast<double>(m.parameter_bytes + m.gradient_bytes +
                                           m.optimizer_state_bytes.value_or(0));

  auto variant = [&](bool mp, bool ck) {
    FitVariant v;
    v.mixed_precision = mp;
    v.checkpointing = ck;
    v.as_run = mp == m.mixed_precision && ck == m.checkpointing;
    if (!m.activation_bytes) {
      // Leaving them out would rank the variants by their cast caches alone (mixed precision
      // "needing more" than fp32): no estimate is better than a wrong one.
      v.why = "activation bytes not measured: " +
              (m.activation_why.empty() ? std::string("no chain was measured") : m.activation_why);
      return v;
    }
    double act = static_cast<double>(*m.activation_bytes);
    if (mp != m.mixed_precision)
      act = mp ? act * thresholds::kMixedPrecisionActivationFactor
               : act / thresholds::kMixedPrecisionActivationFactor;
    if (ck != m.checkpointing) {
      if (m.checkpointing) {
        v.why =
            "the run checkpointed: the activations it recomputed instead of keeping were not "
            "measured";
        return v;
      }
      if (!m.checkpointable_blocks) {
        v.why = "the number of checkpointable blocks was not measured (watch a Sequential model)";
        return v;
      }
      act *= checkpoint_factor(*m.checkpointable_blocks);
    }
    v.activation_bytes = static_cast<std::int64_t>(act);
    v.cast_cache_bytes = mp ? static_cast<std::int64_t>(m.parameter_bytes *
                                                        thresholds::kMixedPrecisionCastCacheFactor)
                            : 0;
    v.need_bytes =
        static_cast<std::int64_t>((fixed + act + v.cast_cache_bytes) * out.fragmentation) +
        out.overhead_bytes;
    for (const CardSize& c : kFitCards) v.cards.push_back(fit_on(*v.need_bytes, c.capacity_bytes));
    return v;
  };
  out.variants.push_back(variant(m.mixed_precision, m.checkpointing));
  for (bool mp : {false, true})
    for (bool ck : {false, true})
      if (mp != m.mixed_precision || ck != m.checkpointing) out.variants.push_back(variant(mp, ck));
  return out;
}

std::optional<HardwareFit> epoch_hardware_fit(const EpochSummary& e, const Environment& env) {
  if (!e.footprint) return std::nullopt;
  HardwareFit fit = hardware_fit(*e.footprint, e.device_memory,
                                 e.telemetry ? e.telemetry->memory_used_bytes_max : std::nullopt);
  if (env.cpu_run()) {
    fit.cards_compared = false;
    for (FitVariant& v : fit.variants) v.cards.clear();
  }
  return fit;
}

std::optional<std::string> shared_not_estimated_reason(const HardwareFit& fit) {
  if (fit.variants.empty()) return std::nullopt;
  for (const FitVariant& v : fit.variants)
    if (v.need_bytes || v.why != fit.variants.front().why) return std::nullopt;
  return fit.variants.front().why;
}

}  // namespace fathom
