#pragma once
// Turns an epoch's measurements into findings: evidence, why it matters, estimated gain, fix.
// Every threshold lives in thresholds.h; docs/thresholds.md lists the rules and what fires them.
#include <fathom/report.h>

#include <string_view>
#include <vector>

namespace fathom {

// Stable finding ids: reports, `fathom diff` and Auto mode (which sets Finding::applied on the
// findings it acted on) match on them.
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
}  // namespace finding_id

// Findings for one epoch, most severe first, then largest estimated gain.
std::vector<Finding> advise(const EpochSummary& epoch, const Environment& env);

}  // namespace fathom
