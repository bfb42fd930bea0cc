#pragma once
// fathom inside a torch.distributed (c10d) job.
//
// Every rank runs its own Session. fathom learns the rank from RANK / LOCAL_RANK / WORLD_SIZE
// (torchrun and most launchers set them) or from the process group handed to it, names the rank
// in every report file (run.rank3.json) and NVTX epoch / step label ("step 7 [rank 3]"), and, once
// it has the job's process group, sends a compact summary of each epoch to rank 0, which writes
// the job report (run.job.json): the ranks side by side, the slowest rank and the skew,
// communication and memory per rank, ranks that never reported, and cross-rank findings.
//
//   auto pg = c10::make_intrusive<c10d::ProcessGroup>(store, rank, world_size);  // + backend
//   fathom::Session session(fathom::Options().report_dir("reports"));
//   fathom::use_process_group(session, pg);
//   ...
//   auto work = fathom::track_collective(session, pg->allreduce(bucket), bucket_bytes);
//   ...
//   fathom::wait_collective(session, *work);   // the wait counts as exposed communication
//
// The summaries travel through the process group's store (ProcessGroup::getStore()), at epoch
// ends only, never inside a step: rank 0 waits for them at most merge_timeout, then writes what
// it has and names the missing ranks. Why the store and not a gather: docs/distributed.md.
#include <c10/util/intrusive_ptr.h>
#include <fathom/rank_info.h>

#include <chrono>
#include <cstdint>

namespace c10d {
class ProcessGroup;
class Store;
class Work;
}  // namespace c10d

namespace fathom {

class Session;

class DistributedOptions {
 public:
  DistributedOptions() = default;

  // How long rank 0 waits at each epoch end for the other ranks' summaries before it writes the
  // job report without them. FATHOM_MERGE_TIMEOUT (seconds) overrides it.
  DistributedOptions& merge_timeout(std::chrono::milliseconds v) {
    merge_timeout_ = v;
    return *this;
  }
  std::chrono::milliseconds merge_timeout() const noexcept { return merge_timeout_; }

 private:
  std::chrono::milliseconds merge_timeout_{std::chrono::seconds(60)};
};

// Hands fathom the job's process group: its rank and size, and its store for the summaries.
// Call it before the first epoch. Throws fathom::Error when the group disagrees with RANK /
// WORLD_SIZE, has no store, or would change the rank after the first epoch wrote its report.
// Does nothing when fathom is off.
void use_process_group(Session& session, const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                       DistributedOptions options = {});
// The same with a store and a rank, for jobs that share a c10d store but hold no ProcessGroup
// object fathom can reach.
void use_store(Session& session, const c10::intrusive_ptr<c10d::Store>& store, RankInfo rank,
               DistributedOptions options = {});

// The rank fathom uses (RankInfo{} for a single process or when fathom is off).
RankInfo session_rank(const Session& session) noexcept;

// Communication the training loop launched: fathom records the time from now to the work's
// completion (its future; the host clock) and the bytes. Returns work, so a launch reads
// `auto w = track_collective(session, pg->allreduce(t), bytes);`. Under NCCL the host sees only
// the launch: communication comes from CUPTI's NCCL kernels instead, and this only counts.
const c10::intrusive_ptr<c10d::Work>& track_collective(Session& session,
                                                       const c10::intrusive_ptr<c10d::Work>& work,
                                                       std::int64_t bytes) noexcept;
// work.wait(), timed: the time the training thread spends here is communication that compute
// did not hide. Rethrows what wait() throws (a dead peer, a timeout).
void wait_collective(Session& session, c10d::Work& work);

}  // namespace fathom
