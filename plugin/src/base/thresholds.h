#pragma once
// Every threshold the advisor uses, in one place, with where it comes from.
// docs/thresholds.md lists them with the rule that reads each.
#include <cstddef>
#include <cstdint>

namespace fathom::thresholds {

// --- data loading ---------------------------------------------------------------------------
// PyTorch profiler's rule: data loading above 5% of step time is worth more workers / prefetch.
inline constexpr double kDataShareOfStep = 0.05;
// Above this share a loader-bound run is critical, not just a warning.
inline constexpr double kDataShareCritical = 0.25;

// --- memory ---------------------------------------------------------------------------------
// Caching-allocator peak above 90% of device memory: the next larger batch or model will not fit.
inline constexpr double kDeviceMemoryShare = 0.90;
// Memory below this share and the GPU busy below kGpuBusyShareLow: a larger batch would fit and
// keep the GPU busier.
inline constexpr double kIdleMemoryShare = 0.50;

// --- device busy / idle ----------------------------------------------------------------------
// GPU busy below 50% of the step (kernel time, or NVML utilization): larger batch, fewer syncs.
inline constexpr double kGpuBusyShareLow = 0.50;

// --- copies and transfers --------------------------------------------------------------------
// Nsight Systems' rule: any asynchronous copy from pageable memory should use pinned memory.
inline constexpr std::int64_t kPageableAsyncCopies = 1;
// Synchronous host-to-device copies larger than this stall the host for the whole transfer.
inline constexpr std::int64_t kSyncCopyBytes = 64 * 1024;
// Copies reaching less than this share of the link's peak are slower than the link allows.
inline constexpr double kTransferShareOfLinkPeak = 0.50;
// Copies smaller than this are latency-bound: their bandwidth says nothing about the link.
inline constexpr std::int64_t kTransferMinBytesForBandwidth = 1 << 20;
// Host-device transfer time above this share of the step is worth prefetching or overlapping.
inline constexpr double kTransferShareOfStep = 0.05;

// --- precision ------------------------------------------------------------------------------
// Tensor Core kernels below this share of kernel time while Tensor-Core-eligible FP32 work is
// significant: mixed precision would move that work onto Tensor Cores. Compute capability 7.0
// (Volta) is the first with Tensor Cores.
inline constexpr double kTensorCoreShareLow = 0.10;
inline constexpr double kEligibleFp32ShareOfKernels = 0.10;
inline constexpr int kTensorCoreMinComputeMajor = 7;

// --- host synchronization and launches ---------------------------------------------------------
// Host waits on the device inside the step (cudaStreamSynchronize, .item(), .cpu()) above this
// share of step time keep the host from queueing work ahead.
inline constexpr double kHostSyncShareOfStep = 0.05;
// Launch-bound: most kernels shorter than the launch overhead and the GPU idle between them.
// Kernels shorter than kTinyKernelNs are "tiny" (gpu_aggregator counts them): their launch cost is
// comparable to their work.
inline constexpr std::int64_t kTinyKernelNs = 10'000;
inline constexpr double kTinyKernelShare = 0.50;       // of kernels
inline constexpr double kLaunchBoundBusyShare = 0.60;  // GPU busy below this share of the step

// --- communication ---------------------------------------------------------------------------
// NCCL time above 10% of the step is worth overlapping, accumulating or batching more.
inline constexpr double kCommunicationShareOfStep = 0.10;
// Less than half of the communication hidden behind compute counts as poorly overlapped.
inline constexpr double kCommunicationOverlapLow = 0.50;

// --- across ranks (job report, job_findings.cpp) ------------------------------------------------
// A rank whose work per step (step less communication wait) exceeds the median of the other
// ranks by more than 10%, and by at least 1 ms, holds every synchronous all-reduce back.
inline constexpr double kStragglerShare = 0.10;
inline constexpr double kStragglerMinMs = 1.0;
// One rank waiting on data: its data wait exceeds the other ranks' median by this share of its
// step (the single-rank rule, kDataShareOfStep, applied to the difference).
inline constexpr double kRankDataExcessShareOfStep = 0.05;
// Load imbalance: samples per step (or steps per epoch) differ by more than 10% across ranks.
inline constexpr double kLoadImbalanceShare = 0.10;

// --- clocks and link (NVML) --------------------------------------------------------------------
// Clocks lowered by power or temperature in more than this share of samples.
inline constexpr double kThrottleShareOfSamples = 0.10;

// --- scopes ---------------------------------------------------------------------------------
// Step time spent outside any phase scope above this share is reported as unaccounted.
inline constexpr double kUnaccountedShareOfStep = 0.10;

// --- hardware fit model (assumptions, not thresholds) -------------------------------------------
// Autocast keeps most saved activations in 16 bits: half their fp32 size.
inline constexpr double kMixedPrecisionActivationFactor = 0.5;
// Autocast caches a 16-bit copy of each weight for the step: half the fp32 parameter bytes.
inline constexpr double kMixedPrecisionCastCacheFactor = 0.5;
// CUDA context, cuBLAS / cuDNN workspaces when NVML did not measure them.
inline constexpr std::int64_t kAssumedRuntimeOverheadBytes = 768LL << 20;

// Step alarms (analyze/step_alarms.cpp). A change point in step time needs Pettitt's p-value
// below kStepChangePValue (strict: the session tests the series again and again as it grows),
// at least kStepChangeMinSide steps on each side, and medians that differ by kStepChangeMinRelative
// or more (smaller changes are real but not worth a finding).
inline constexpr double kStepChangePValue = 1e-4;
inline constexpr std::int64_t kStepChangeMinSide = 8;
inline constexpr double kStepChangeMinRelative = 0.10;
// Memory creep: Mann-Kendall's z above kMemoryCreepZ over the steps after the warm-up (the first
// kMemoryCreepWarmupShare of them, at least 5), and a rise of at least kMemoryCreepMinBytes and
// kMemoryCreepMinShare of the level between the first and last quarters.
inline constexpr double kMemoryCreepZ = 4.0;
inline constexpr double kMemoryCreepWarmupShare = 0.10;
inline constexpr std::int64_t kMemoryCreepMinBytes = 1 << 20;
inline constexpr double kMemoryCreepMinShare = 0.02;
// The series keeps at most this many steps per epoch (then every other one; the report writes
// at most kStepSeriesReported of them).
inline constexpr std::size_t kStepSeriesCapacity = 2048;
inline constexpr std::size_t kStepSeriesReported = 512;

// Model FLOPs utilization below kMfuLow is a finding (info), below kMfuVeryLow a warning.
inline constexpr double kMfuLow = 0.30;
inline constexpr double kMfuVeryLow = 0.10;

}  // namespace fathom::thresholds
