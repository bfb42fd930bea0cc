#pragma once
// The report's memory footprint (hardware_fit.h), in the parts the features that measure them
// contribute: the model's bytes (footprint_extension.cpp), the activations (the checkpoint
// extension), mixed precision (the AMP extension). Each writes only its own part, and the session
// merges them in one place (merge_footprint), so the order the extensions run in does not matter.
#include <fathom/hardware_fit.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fathom::detail {

struct ModelBytes {
  std::int64_t parameter_count = 0;
  std::int64_t parameter_bytes = 0;
  std::int64_t gradient_bytes = 0;
  std::optional<std::int64_t> optimizer_state_bytes;  // see MemoryFootprint
  std::vector<ModelFootprint> models;                 // each watched model's share
};

struct ActivationBytes {
  // Saved for backward at a step's peak, by the measured chains; nullopt when none was measured
  // this epoch, and then why says why.
  std::optional<std::int64_t> saved_bytes;
  std::optional<std::int64_t> checkpointable_blocks;
  bool checkpointing = false;  // a plan was applied
  std::string why;
};

struct FootprintParts {
  std::optional<ModelBytes> model;  // absent: no model watched, and then no footprint at all
  std::optional<ActivationBytes> activations;
  bool mixed_precision = false;  // some step ran under autocast
};

// The footprint the report holds: nullopt without the model's part (nothing to size).
inline std::optional<MemoryFootprint> merge_footprint(const FootprintParts& parts) {
  if (!parts.model) return std::nullopt;
  MemoryFootprint f;
  f.parameter_count = parts.model->parameter_count;
  f.parameter_bytes = parts.model->parameter_bytes;
  f.gradient_bytes = parts.model->gradient_bytes;
  f.optimizer_state_bytes = parts.model->optimizer_state_bytes;
  f.models = parts.model->models;
  f.activation_why = "no extension measured them";
  if (parts.activations) {
    f.activation_bytes = parts.activations->saved_bytes;
    f.activation_why = parts.activations->saved_bytes ? "" : parts.activations->why;
    f.checkpointable_blocks = parts.activations->checkpointable_blocks;
    f.checkpointing = parts.activations->checkpointing;
  }
  f.mixed_precision = parts.mixed_precision;
  return f;
}

}  // namespace fathom::detail
