#pragma once
// The mixed-precision section of an epoch's report: the precision each phase ran in, the steps
// whose optimizer update was skipped on inf/NaN gradients, the gradient scale's history, and what
// the Auto policy did (enabled, accepted, rolled back) and why. Schema: docs/report-schema.md.
#include <fathom/phase.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

// How many phase runs used autocast (16-bit) and how many ran in fp32. The backward phase follows
// its forward: autograd computes gradients in the dtypes the forward produced.
struct PhasePrecision {
  Phase phase = Phase::Forward;
  std::int64_t low_precision = 0;
  std::int64_t fp32 = 0;
};

// The gradient scale after an update that changed it. step: the session's step count since the
// first epoch (not reset per epoch).
struct ScalePoint {
  std::int64_t step = 0;
  double scale = 0;
};

// Something the mixed-precision policy did. Typed, so the advisor and the extension switch on it
// rather than compare strings; amp_event_kind_name() gives the report's (JSON) spelling.
enum class AmpEventKind {
  Enabled,          // "enabled": Auto turned it on after the fp32 warm-up
  Accepted,         // "accepted": the watch passed
  RolledBack,       // "rolled_back": Auto turned it off again
  NotEnabled,       // "not_enabled": it could not or would not start
  WarmupRestarted,  // "warmup_restarted": a non-finite fp32 loss restarted the warm-up
};
std::string_view amp_event_kind_name(AmpEventKind k) noexcept;
// The kind a report spells `name`; nullopt for a name this version does not know.
std::optional<AmpEventKind> amp_event_kind_from_name(std::string_view name) noexcept;

struct AmpEvent {
  std::int64_t step = 0;
  AmpEventKind kind = AmpEventKind::Enabled;
  std::string detail;
};

// What the AMP extension knows of the device, for the advisor's mixed-precision rules.
struct AmpDeviceFacts {
  bool cuda = false;
  std::string device_name;
  int compute_major = 0;
  int compute_minor = 0;
  // CPU runs: the bf16 units the host has and this process's kernels may use (cpu_bf16_units(),
  // host_info.h, less what usable_cpu_bf16_units() takes away); empty: none.
  std::vector<std::string> cpu_bf16_units;
  // What took the host's units away ("ONEDNN_MAX_CPU_ISA=AVX2"); "" when nothing did.
  std::string cpu_bf16_limit;
};

// At most this many scale points per epoch: the scale the epoch started with, then the latest
// changes.
inline constexpr std::size_t kScaleHistoryLimit = 64;

struct MixedPrecisionSummary {
  std::string policy;  // "off", "suggest", "auto", "on"
  std::string
      state;  // at the epoch's end: "fp32", "warming_up", "watching", "enabled", "rolled_back"
  std::string dtype;                     // "bf16", "fp16"; "" while it never ran
  std::string device_type;               // autocast's device type: "cpu", "cuda"
  bool grad_scaling = false;             // a GradScaler scaled the loss (fp16)
  std::int64_t steps_low_precision = 0;  // steps whose forward ran under autocast
  std::int64_t steps_fp32 = 0;
  std::vector<PhasePrecision> phases;     // forward, backward, optimizer
  std::int64_t skipped_steps = 0;         // optimizer updates skipped on inf/NaN gradients
  std::vector<ScalePoint> scale_history;  // the first scale, then each change; kScaleHistoryLimit
  std::int64_t scale_changes = 0;         // all changes, also those left out of the history
  std::optional<double> scale;            // at the epoch's end, when a GradScaler ran
  // What the Auto policy compared (medians of host step time; loss level of the fp32 trend).
  std::optional<double> fp32_step_ms;
  std::optional<double> amp_step_ms;
  std::optional<double> fp32_loss_reference;
  std::optional<double> amp_loss;
  std::vector<AmpEvent> events;
  // The session-wide step number of the epoch's first step: events count steps across epochs,
  // the epoch's step series from 0. Not in the JSON report (a report read back has 0).
  std::int64_t first_step = 0;
  // The device the policy ran on, for the advisor's suggestion (amp_advice.h); not in the JSON
  // report, so a report read back has none and gets no new suggestion.
  std::optional<AmpDeviceFacts> device;
};

}  // namespace fathom
