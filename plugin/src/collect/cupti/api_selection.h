#pragma once
// Which CUDA runtime and driver calls fathom has CUPTI record, and their names.
//
// Recording every runtime and driver call (CUPTI_ACTIVITY_KIND_RUNTIME / DRIVER) costs a record
// per cudaGetDevice, cudaStreamIsCapturing, cuCtxGetCurrent...: several per kernel launch in a
// PyTorch loop, read by nobody. fathom reads only launches, copies, memsets, synchronizations,
// stream waits and event records (its own phase events: proof that its callbacks still receive
// what it enabled), so it enables those cbids one by one (cuptiActivityEnableRuntimeApi /
// DriverApi, CUDA 12.5+). The selection goes by name, so it holds for cbids added by later CUDA
// versions (the _ptsz variants, new launch entry points).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collect/cupti/cupti_api.h"

namespace fathom::cupti {

// Whether fathom reads a call of this name (display name: "cudaLaunchKernel", no _v suffix).
bool traced_runtime_api(std::string_view name) noexcept;
bool traced_driver_api(std::string_view name) noexcept;

// The cbids of a domain whose names are traced. Asks CUPTI for each cbid's name once per
// process; call with no fathom lock held.
std::vector<std::uint32_t> traced_cbids(const Api& api, CUpti_CallbackDomain domain);

// CUPTI's name of a cbid in fathom's form ("cudaLaunchKernel"), cached for the process; for a
// cbid CUPTI cannot name, "runtime api 211" / "driver api 307". Thread-safe; the CUPTI call is
// made outside the cache's lock.
const std::string& callback_name(const Api& api, CUpti_CallbackDomain domain, std::uint32_t cbid);

}  // namespace fathom::cupti
