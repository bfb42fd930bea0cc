#pragma once
// Hardware fit: from what a run measured (parameters, gradients, optimizer state, activations)
// the memory it needs on common card sizes, with and without mixed precision and activation
// checkpointing. The model and its assumptions: docs/report-schema.md#hardware-fit; the analysis
// that makes it: analyze/fit_hardware.h.
#include <fathom/records.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

// One watched model's share of the footprint (a GAN's generator and discriminator, say).
struct ModelFootprint {
  std::string name;  // the model's type ("Generator"), "#2" added when two share it
  std::int64_t parameter_count = 0;
  std::int64_t parameter_bytes = 0;
  std::int64_t gradient_bytes = 0;
  // The state the watched optimizers keep for this model's parameters; nullopt when no watched
  // optimizer holds them, or one that does keeps a state type fathom does not read.
  std::optional<std::int64_t> optimizer_state_bytes;
};

// Measured by the session (hooks/) from the models, the optimizers and the autograd graph.
// The totals add up every watched model and optimizer (a parameter two models share counts once).
struct MemoryFootprint {
  std::int64_t parameter_count = 0;
  std::int64_t parameter_bytes = 0;  // as stored (fp32 master weights under autocast)
  std::int64_t gradient_bytes = 0;   // .grad tensors after backward
  // e.g. Adam's exp_avg and exp_avg_sq; nullopt when no optimizer was watched or its state type
  // is not one fathom reads (the fit then leaves it out and says so).
  std::optional<std::int64_t> optimizer_state_bytes;
  // Saved for backward at a step's peak, by the chains fathom measured (fathom::forward,
  // fathom::block); nullopt when none was measured, and then activation_why says why and the fit
  // estimates no configuration: a model it cannot see is not a model without activations.
  std::optional<std::int64_t> activation_bytes;
  std::string activation_why;
  std::vector<ModelFootprint> models;                 // per watched model, in watch order
  std::optional<std::int64_t> checkpointable_blocks;  // blocks of the chain the planner may wrap
  bool mixed_precision = false;                       // the run already used autocast
  bool checkpointing = false;                         // the run already checkpointed activations
};

enum class Fit { Fits, Tight, DoesNotFit };
std::string_view fit_name(Fit f) noexcept;  // "fits", "tight", "does_not_fit"

struct CardSize {
  std::string_view label;       // "80 GB"
  std::int64_t capacity_bytes;  // what the driver reports for such a card
};
// The cards the report compares against: 24 GB (RTX 4090, L4, A10), 40 GB (A100-40GB),
// 80 GB (A100-80GB, H100), 141 GB (H200).
inline constexpr CardSize kFitCards[] = {{"24 GB", 24LL << 30},
                                         {"40 GB", 40LL << 30},
                                         {"80 GB", 80LL << 30},
                                         {"141 GB", 143771LL << 20}};

// One configuration: as run, or with mixed precision and / or checkpointing switched.
struct FitVariant {
  bool mixed_precision = false;
  bool checkpointing = false;
  bool as_run = false;
  std::optional<std::int64_t> need_bytes;  // empty: not estimated, see why
  std::string why;                         // why not estimated
  std::int64_t activation_bytes = 0;
  std::int64_t cast_cache_bytes = 0;  // low-precision weight copies autocast keeps per step
  std::vector<Fit> cards;             // per kFitCards entry, when need_bytes is known
};

struct HardwareFit {
  // false on a CPU run: the card sizes are GPU memory, so no variant is compared with them (each
  // variant's cards stay empty) and no writer tables them.
  bool cards_compared = true;
  std::int64_t overhead_bytes = 0;  // CUDA context, library workspaces
  bool overhead_measured = false;   // true: NVML memory used minus allocator reserved
  double fragmentation = 1.0;  // allocator reserved / allocated at the peak (measured; 1 if not)
  std::vector<FitVariant> variants;  // as run first
};

}  // namespace fathom
