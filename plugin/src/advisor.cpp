#include <fathom/advisor.h>
#include <fathom/thresholds.h>

#include <fmt/format.h>

#include <algorithm>

namespace fathom {
namespace {

std::string percent(double fraction) { return fmt::format("{:.1f} %", 100.0 * fraction); }
std::string mib(std::int64_t bytes) { return fmt::format("{:.1f} MiB", bytes / 1048576.0); }

// Data loading: the gap between steps (or explicit data scopes) against the step time.
void data_wait(const EpochSummary& e, std::vector<Finding>& out) {
  const PhaseSummary& data = e.phase(Phase::Data);
  const double busy = e.step_ms_total + data.wall_ms_total;
  if (data.count == 0 || busy <= 0) return;
  const double share = data.wall_ms_total / busy;
  if (share <= thresholds::kDataShareOfStep) return;
  Finding f;
  f.id = "data.loader_bound";
  f.severity = share > 0.25 ? Severity::Critical : Severity::Warning;
  f.title = "Training waits on data loading";
  f.evidence = {{"data time share", percent(share)},
                {"data time per step", fmt::format("{:.2f} ms", data.wall_ms_mean())},
                {"measured as", data.inferred ? "gap between steps" : "data scopes"}};
  f.why = "While the loader prepares the next batch the device has nothing to do.";
  f.estimated_gain = fmt::format("up to {} of step time", percent(share));
  f.gain_fraction = share;
  f.fix =
      "auto loader = torch::data::make_data_loader(std::move(dataset),\n"
      "    torch::data::DataLoaderOptions().batch_size(bs).workers(4));  // load in parallel";
  out.push_back(std::move(f));
}

// Copies through fathom's helper: pageable sources and synchronous host-to-device copies.
void copies(const EpochSummary& e, std::vector<Finding>& out) {
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
    Finding f;
    f.id = "copy.pageable";
    f.severity = Severity::Warning;
    f.title = "Host-to-device copies read pageable memory";
    f.evidence = {{"pageable copies", fmt::format("{}", pageable_count)},
                  {"pageable bytes", mib(pageable_bytes)}};
    f.why =
        "The driver stages pageable memory through a pinned bounce buffer: the copy is slower "
        "and cannot overlap with compute.";
    f.estimated_gain = "faster copies, and overlap with compute when also non-blocking";
    f.fix = "auto x = step.to_device(batch.data.pin_memory(), device, /*non_blocking=*/true);";
    out.push_back(std::move(f));
  }
  if (sync_count > 0 && sync_bytes / std::max<std::int64_t>(sync_count, 1) > thresholds::kSyncCopyBytes &&
      e.step_ms_total > 0) {
    Finding f;
    f.id = "copy.synchronous";
    f.severity = Severity::Info;
    f.title = "Host-to-device copies are synchronous";
    const double share = sync_ms / e.step_ms_total;
    f.evidence = {{"synchronous copies", fmt::format("{}", sync_count)},
                  {"bytes", mib(sync_bytes)},
                  {"host time in them", fmt::format("{:.2f} ms ({} of step time)", sync_ms, percent(share))}};
    f.why = "A synchronous copy blocks the host until it is done, so it cannot queue more work.";
    f.estimated_gain = fmt::format("up to {} of step time", percent(share));
    f.gain_fraction = share;
    f.fix = "auto x = step.to_device(batch.data.pin_memory(), device, /*non_blocking=*/true);";
    out.push_back(std::move(f));
  }
}

void device_memory(const EpochSummary& e, const Environment& env, std::vector<Finding>& out) {
  if (!e.device_memory || !env.device_memory_bytes || *env.device_memory_bytes <= 0) return;
  const double share =
      static_cast<double>(e.device_memory->peak_reserved_bytes) / *env.device_memory_bytes;
  if (share <= thresholds::kDeviceMemoryShare && e.device_memory->ooms == 0) return;
  Finding f;
  f.id = "memory.near_capacity";
  f.severity = e.device_memory->ooms > 0 ? Severity::Critical : Severity::Warning;
  f.title = "Device memory is nearly full";
  f.evidence = {{"peak reserved", mib(e.device_memory->peak_reserved_bytes)},
                {"device memory", mib(*env.device_memory_bytes)},
                {"share", percent(share)},
                {"allocator retries", fmt::format("{}", e.device_memory->alloc_retries)},
                {"out-of-memory errors", fmt::format("{}", e.device_memory->ooms)}};
  f.why = "A larger batch or model will not fit, and allocator retries flush the cache (slow).";
  f.estimated_gain = "room for a larger batch; fewer allocator retries";
  f.fix = "fathom::Options().mode(fathom::Mode::Auto)  // enables checkpointing / mixed precision";
  out.push_back(std::move(f));
}

void unaccounted(const EpochSummary& e, std::vector<Finding>& out) {
  double in_phases = 0;
  for (const PhaseSummary& p : e.phases) {
    if (p.phase != Phase::Data || !p.inferred) in_phases += p.wall_ms_total;
  }
  if (e.step_ms_total <= 0) return;
  const double share = std::max(0.0, (e.step_ms_total - in_phases) / e.step_ms_total);
  if (share <= thresholds::kUnaccountedShareOfStep) return;
  Finding f;
  f.id = "scopes.unaccounted";
  f.severity = Severity::Info;
  f.title = "Part of each step runs outside any phase scope";
  f.evidence = {{"step time outside phases", percent(share)}};
  f.why = "fathom can only attribute time to a phase inside a phase scope.";
  f.estimated_gain = "none by itself: a clearer report";
  f.fix = "{ auto f = step.forward(); ... }  { auto b = step.backward(); ... }";
  out.push_back(std::move(f));
}

int rank(Severity s) { return s == Severity::Critical ? 0 : s == Severity::Warning ? 1 : 2; }

}  // namespace

std::vector<Finding> advise(const EpochSummary& epoch, const Environment& env) {
  std::vector<Finding> out;
  data_wait(epoch, out);
  copies(epoch, out);
  device_memory(epoch, env, out);
  unaccounted(epoch, out);
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    if (rank(a.severity) != rank(b.severity)) return rank(a.severity) < rank(b.severity);
    return a.gain_fraction.value_or(0) > b.gain_fraction.value_or(0);
  });
  return out;
}

}  // namespace fathom
