#pragma once
// The session's distributed feature (fathom/distributed.h): rank-named reports and ranges, the
// communication ledger, and the job report rank 0 merges at each epoch end.
#include <memory>

#include "session/session_extension.h"

namespace fathom::detail {

class SessionState;

// Reads RANK / LOCAL_RANK / WORLD_SIZE (fathom::Error on a bad value). In a distributed job it
// names the rank in the session's report file and NVTX labels and returns the extension (which
// merges once use_process_group hands it the job's store); otherwise null.
std::unique_ptr<SessionExtension> make_distributed_extension(SessionState& state);

}  // namespace fathom::detail
