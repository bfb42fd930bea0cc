#pragma once
// The session's distributed feature (fathom/distributed.h): rank-named reports and ranges, the
// communication ledger, and the job report rank 0 merges at each epoch end.
#include <memory>

#include "framework/session_extension.h"

namespace fathom::detail {

class SessionState;
class DistributedExtension;

// Reads RANK / LOCAL_RANK / WORLD_SIZE (fathom::Error on a bad value), names the rank in the
// session's report file and NVTX labels in a distributed job, and adds the extension to state.
// Every session has it; it stays idle in a single process until use_process_group (or use_store)
// hands it the job's store.
DistributedExtension* add_distributed_extension(SessionState& state);

}  // namespace fathom::detail
