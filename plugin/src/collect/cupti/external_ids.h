#pragma once
// External correlation ids and thread ids on the hooks' side of CUPTI (the public functions are
// declared in fathom/cupti_collector.h). The collector points them at the CUPTI it arms, and
// takes them away when it stands aside or stops. Internal to the core.
#include "collect/cupti/cupti_api.h"

namespace fathom::collector {

// The CUPTI push/pop_external_id call from now on; nullptr: none (each push is one relaxed
// load). The table is copied and kept for the life of the process, so a thread still popping
// after a stop never sees a dangling one.
void set_external_api(const cupti::Api* api) noexcept;
// Pops every id fathom pushed on the calling thread (a phase's, an op's): a profile seen
// starting must not find them on CUPTI's stack. The pops the hooks make later are then no-ops.
void withdraw_external_ids() noexcept;
// CUpti_ActivityThreadIdType in effect, read when a collector arms.
void set_thread_id_type(int type) noexcept;

}  // namespace fathom::collector
