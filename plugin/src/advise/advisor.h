#pragma once
// Turns an epoch's measurements into findings: evidence, why it matters, estimated gain, fix.
// Every threshold lives in thresholds.h; docs/thresholds.md lists the rules and what fires them.
#include <fathom/memory_budget.h>
#include <fathom/report.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

// Stable finding ids: reports and `fathom diff` match on them. Every id any report holds is
// declared here, once, and documented in docs/thresholds.md; only the advisor's rules
// (advisor*.cpp, amp_advice.cpp, job_findings.cpp) make findings. Finding::applied says Auto mode
// acted on it, as read from what the extensions measured and did (mixed_precision.h,
// module_report.h).
namespace finding_id {
inline constexpr std::string_view kDataLoaderBound = "data.loader_bound";
inline constexpr std::string_view kCopyPageable = "copy.pageable";
inline constexpr std::string_view kCopySynchronous = "copy.synchronous";
inline constexpr std::string_view kTransferBelowLinkPeak = "transfer.below_link_peak";
inline constexpr std::string_view kTransferExposed = "transfer.exposed";
inline constexpr std::string_view kLinkDegraded = "link.degraded";
inline constexpr std::string_view kMemoryNearCapacity = "memory.near_capacity";
inline constexpr std::string_view kHardwareFit = "memory.hardware_fit";
inline constexpr std::string_view kBatchHeadroom = "batch.headroom";
inline constexpr std::string_view kMixedPrecision = "precision.mixed";
inline constexpr std::string_view kHostSync = "sync.in_step";
inline constexpr std::string_view kLaunchBound = "launch.bound";
inline constexpr std::string_view kCommunication = "communication.exposed";
inline constexpr std::string_view kClocksThrottled = "clocks.throttled";
inline constexpr std::string_view kScopesUnaccounted = "scopes.unaccounted";
// Step time rose at one step and stayed up; memory rises steadily (advisor_step_rules.cpp).
inline constexpr std::string_view kStepSlowdown = "steps.slowdown";
inline constexpr std::string_view kMemoryCreep = "memory.creep";
// The step's counted FLOPs reach a small share of the device's peak (advisor_throughput_rules.cpp).
inline constexpr std::string_view kLowUtilization = "flops.low_utilization";
// Auto mode turned mixed precision off again (the loss went non-finite or drifted, or the steps
// got slower). "precision.mixed" is the suggestion, or, applied, that it runs.
inline constexpr std::string_view kMixedPrecisionRolledBack = "precision.rolled_back";
// A checkpoint plan for one chain (ModuleReport::plans): suggested, or applied by Auto mode.
inline constexpr std::string_view kActivationCheckpointing = "memory.activation_checkpointing";
// A joint plan for one chain (ModuleReport::activation_plans): each saved tensor kept,
// recomputed or offloaded; suggested, or applied by Auto mode.
inline constexpr std::string_view kActivationPlan = "memory.activation_plan";
// Across ranks, in rank 0's job report (job_findings.cpp).
inline constexpr std::string_view kRankStraggler = "distributed.straggler";
inline constexpr std::string_view kRankDataWait = "distributed.rank_data_wait";
inline constexpr std::string_view kRankLoadImbalance = "distributed.load_imbalance";
inline constexpr std::string_view kRankCommunicationExposed = "distributed.communication_exposed";
inline constexpr std::string_view kRanksMissing = "distributed.missing_ranks";
}  // namespace finding_id

// The report's order: what is left to do before what fathom applied itself, then the most severe,
// then the largest estimated gain. A fix fathom applied is no longer a problem: its severity is
// info (the finding says what fathom did), whatever the rule rated the problem it fixed.
void order_findings(std::vector<Finding>& findings);

// Findings for one epoch in order_findings' order, each fix written in env.language (C++ or
// Python, python_fixes.cpp). What a rule could not
// measure is appended to not_measured, each entry once (it may be env.not_measured: the rules
// read only env's device facts).
std::vector<Finding> advise(const EpochSummary& epoch, const Environment& env,
                            std::vector<Unmeasured>& not_measured);
// The same, for callers that keep no not-measured list (tests, offline tools).
std::vector<Finding> advise(const EpochSummary& epoch, const Environment& env);

// Whether the chains' activations must shrink, and to how many bytes: the decision behind
// Suggest's checkpoint plan and Auto's, made here so both follow the advisor's threshold.
// On a GPU (device_memory_bytes set) the budget bounds the step's allocator peak (default:
// kDeviceMemoryShare of device memory) and the activations give up the excess; on a CPU the
// budget, when set, bounds the activation bytes themselves (a fraction of activation_bytes).
struct ActivationTarget {
  std::int64_t bytes = 0;  // for all chains together; may be <= 0 when nothing can fit
  std::string budget;      // as the report says it: "12.00 GiB", "90 % of device memory"
};
std::optional<ActivationTarget> checkpoint_activation_target(
    std::int64_t activation_bytes, std::optional<std::int64_t> step_peak_bytes,
    std::optional<std::int64_t> device_memory_bytes, const std::optional<MemoryBudget>& budget);

}  // namespace fathom
