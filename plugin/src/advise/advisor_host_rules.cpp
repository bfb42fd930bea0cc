// Rules on what the host measured: data loading, copies through fathom's helper, unscoped time.
#include <algorithm>

#include "advise/advisor_rules.h"
#include "base/thresholds.h"

namespace fathom::advice {

// Data loading: the gap between steps (or explicit data scopes) against the step time.
void data_wait(const EpochSummary& e, std::vector<Finding>& out) {
  const PhaseSummary& data = e.phase(Phase::Data);
  if (data.count == 0 || e.cycle_ms_total() <= 0) return;
  // The phase table's share (EpochSummary::cycle_ms_total): explicit data scopes run inside the
  // steps and are not added to them a second time.
  const double share = e.phase_share(Phase::Data);
  if (share <= thresholds::kDataShareOfStep) return;
  Finding f =
      make_finding(finding_id::kDataLoaderBound,
                   share > thresholds::kDataShareCritical ? Severity::Critical : Severity::Warning,
                   "Training waits on data loading");
  f.evidence = {{"data time share", percent(share)},
                {"data time per step", fmt::format("{:.2f} ms", data.wall_ms_mean())},
                {"measured as", data.inferred ? "gap between steps" : "data scopes"},
                {"threshold", percent(thresholds::kDataShareOfStep)}};
  f.why = "While the loader prepares the next batch the device has nothing to do.";
  f.estimated_gain = fmt::format("up to {} of step time", percent(share));
  f.gain_fraction = share;
  // fathom does not see where batches come from: the fix covers a loader and a loop's own code
  // (issue 16: a loop without a DataLoader was told to raise its workers).
  f.fix =
      "// load the next batch while this step computes; with a torch::data loader:\n"
      "auto loader = torch::data::make_data_loader(std::move(dataset),\n"
      "    torch::data::DataLoaderOptions().batch_size(bs).workers(8).max_jobs(16));\n"
      "// batches your own code makes: make the next one ahead, on another thread\n"
      "auto next = std::async(std::launch::async, make_batch, i + 1);  // .get() next step";
  out.push_back(std::move(f));
}

// Copies through fathom's helper: pageable sources and synchronous host-to-device copies.
void host_copies(const EpochSummary& e, std::vector<Finding>& out) {
  std::int64_t pageable_count = 0, pageable_bytes = 0, sync_count = 0, sync_bytes = 0;
  double sync_ms = 0;
  for (const CopySummary& c : e.copies) {
    if (c.direction != CopyDirection::HostToDevice) continue;
    if (!c.pinned) {
      pageable_count += c.count;
      pageable_bytes += c.bytes;
    }
    if (!c.non_blocking) {
      sync_count += c.count;
      sync_bytes += c.bytes;
      sync_ms += c.wall_ms_total;
    }
  }
  if (pageable_count >= thresholds::kPageableAsyncCopies) {
    Finding f = make_finding(finding_id::kCopyPageable, Severity::Warning,
                             "Host-to-device copies read pageable memory");
    f.evidence = {{"pageable copies", fmt::format("{}", pageable_count)},
                  {"pageable bytes", bytes_text(pageable_bytes)}};
    f.why =
        "The driver stages pageable memory through a pinned bounce buffer: the copy is slower "
        "and cannot overlap with compute.";
    f.estimated_gain = "faster copies, and overlap with compute when also non-blocking";
    f.fix =
        "// pinned host memory: the loader pins each batch, the copy does not block\n"
        "torch::data::DataLoaderOptions().batch_size(bs).workers(4)  // then, per batch:\n"
        "auto x = step.to_device(batch.data.pin_memory(), device, /*non_blocking=*/true);";
    out.push_back(std::move(f));
  }
  if (sync_count > 0 &&
      sync_bytes / std::max<std::int64_t>(sync_count, 1) > thresholds::kSyncCopyBytes &&
      e.step_ms_total > 0) {
    Finding f = make_finding(finding_id::kCopySynchronous, Severity::Info,
                             "Host-to-device copies are synchronous");
    const double share = sync_ms / e.step_ms_total;
    f.evidence = {
        {"synchronous copies", fmt::format("{}", sync_count)},
        {"bytes", bytes_text(sync_bytes)},
        {"host time in them", fmt::format("{:.2f} ms ({} of step time)", sync_ms, percent(share))}};
    f.why = "A synchronous copy blocks the host until it is done, so it cannot queue more work.";
    f.estimated_gain = fmt::format("up to {} of step time", percent(share));
    f.gain_fraction = share;
    f.fix =
        "// copy the next batch while this one computes (prefetch), from pinned memory\n"
        "auto next = step.to_device(batch.data.pin_memory(), device, /*non_blocking=*/true);";
    out.push_back(std::move(f));
  }
}

void unaccounted(const EpochSummary& e, std::vector<Finding>& out) {
  if (e.step_ms_total <= 0) return;
  // The phase table's "other" row.
  const double share = e.outside_phases_share();
  if (share <= thresholds::kUnaccountedShareOfStep) return;
  Finding f = make_finding(finding_id::kScopesUnaccounted, Severity::Info,
                           "Part of each step runs outside any phase scope");
  f.evidence = {{"step time outside phases", percent(share)}};
  f.why = "fathom can only attribute time to a phase inside a phase scope.";
  f.estimated_gain = "none by itself: a clearer report";
  f.fix = "{ auto f = step.forward(); ... }  { auto b = step.backward(); ... }";
  out.push_back(std::move(f));
}

}  // namespace fathom::advice
