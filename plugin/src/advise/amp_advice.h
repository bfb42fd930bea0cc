#pragma once
// Suggest mode's mixed-precision finding ("precision.mixed"): the measured FP32 work that could run
// on Tensor Cores, the speed-up that moving it to 16 bits can give at most on this GPU
// (gpu_throughput.h), and the code that enables it.
#include <fathom/report.h>
#include <fathom/unmeasured.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "advise/advisor.h"  // finding_id

namespace fathom {

struct TensorCoreResult;

// The eligible work comes from the Tensor Core analysis when one ran (tc: CUPTI kernels, with
// ATen ops where recorded); otherwise the forward and backward device (else host) time bound it
// from above. Returns nothing when there is nothing to gain or nothing to base it on; what it
// could not measure is appended to not_measured (each entry once).
std::optional<Finding> mixed_precision_finding(const EpochSummary& e, const AmpDeviceFacts& device,
                                               const TensorCoreResult* tc,
                                               std::vector<Unmeasured>& not_measured);

// The code a loop needs for fathom's mixed precision (the finding's fix).
std::string mixed_precision_fix(bool cuda);

}  // namespace fathom
