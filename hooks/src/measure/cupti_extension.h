#pragma once
// CUPTI collection for a session: starts the collector when a CUDA device is present and
// Options::cupti() is on, tags the work each phase and eligible op launches (external
// correlation), flushes at step ends without waiting and at the epoch end (once the device is
// synchronized) completely, and feeds the batches to the GpuPipeline whose GPU summary is built
// at each epoch end. torch.profiler is a client the collector asks before every phase: while it
// profiles, fathom stands aside, and the report says from which step to which GPU data is
// missing. When CUPTI is absent, busy with another tool or fails, the report says why and the
// phases are still timed.
#include <c10/core/Device.h>
#include <fathom/gpu_summary.h>
#include <fathom/options.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "analyze/gpu_pipeline.h"
#include "collect/cupti/cupti_collector.h"
#include "formats/activity_file.h"
#include "framework/session_extension.h"
#include "measure/op_correlation.h"

namespace fathom::detail {

// What the session around the extension does on the device.
struct CuptiDeviceHooks {
  // Waits for every stream of the session's device (cudaDeviceSynchronize): before the epoch's
  // forced flush, and when fathom stands aside for a profiler. Empty: never waits.
  std::function<void()> synchronize;
  // The session records two CUDA events a phase (its device timing): calls CUPTI records for
  // fathom, which is how a takeover by a client fathom cannot ask shows.
  bool phase_events = false;
  // Sees every batch before the aggregator takes it (the session's trace file). Empty: none.
  std::function<void(const GpuActivity&)> observe;
};

class CuptiExtension final : public SessionExtension {
 public:
  // Starts a collector for a sink and a configuration; tests pass one that uses the stand-in.
  using Starter = std::function<std::unique_ptr<CuptiCollector>(CuptiCollector::Sink, CuptiConfig)>;

  // Adds why CUPTI is not collecting to env.not_measured when it cannot start.
  CuptiExtension(const Options& options, std::optional<DeviceProperties> device, Environment& env,
                 Starter start = {}, CuptiDeviceHooks hooks = {});
  ~CuptiExtension() override;

  void on_epoch_begin(std::int64_t epoch) noexcept override;
  void on_step_begin(std::int64_t step) noexcept override;
  void on_phase_begin(Phase phase) noexcept override;
  void on_phase_end(Phase phase, bool aborted) noexcept override;
  void on_step_end(std::int64_t step, bool failed) noexcept override;
  void on_epoch_measured(EpochSummary& epoch, Environment& environment) noexcept override;

  bool collecting() const noexcept { return collector_ && collector_->collecting(); }
  const CuptiCollector* collector() const noexcept { return collector_.get(); }
  // The GPU section of the last finished epoch (the report model has no place for it yet).
  const std::optional<GpuSummary>& last_summary() const noexcept { return last_summary_; }

 private:
  void take(GpuActivity&& batch) noexcept;
  // name: what the activity file and a Chrome trace show; role and phase: what the analyses use.
  void annotate(std::string name, AnnotationRole role, Phase phase, std::int64_t begin_ns,
                std::int64_t end_ns) noexcept;
  void report_changes(Environment& env) noexcept;
  void record(const GpuActivity& batch) noexcept;
  void follow_collector() noexcept;

  std::unique_ptr<CuptiCollector> collector_;
  std::unique_ptr<OpCorrelation> ops_;
  std::unique_ptr<GpuPipeline> aggregator_;
  std::unique_ptr<ActivityFileWriter> recorder_;  // Options::record_activity, when set
  GpuActivity unrecorded_annotations_;            // written once a step, not at every phase end
  std::vector<Unmeasured> own_notes_;             // what failed here, for report_changes
  std::size_t own_notes_reported_ = 0;
  std::optional<DeviceProperties> device_;
  CuptiDeviceHooks hooks_;
  bool record_shapes_ = false;
  std::optional<GpuSummary> last_summary_;
  std::size_t notes_reported_ = 0;
  bool began_ = false;  // an epoch has begun: reasons found from now on say when
  std::int64_t epoch_ = 0;
  std::int64_t step_ = 0;
  std::int64_t step_begin_ns_ = 0;
  std::int64_t data_begin_ns_ = 0;  // end of the last step, or the epoch's start
  std::uint64_t thread_ = 0;        // the training thread, as CUPTI names it
  std::array<std::int64_t, kPhaseCount> phase_begin_ns_{};
  std::array<int, kPhaseCount> phase_pushed_{};
};

// The extension a session adds, or nullptr when there is nothing to collect (no CUDA device:
// device_info already says so; CUPTI turned off: says so in env).
// observe: CuptiDeviceHooks::observe.
std::unique_ptr<SessionExtension> make_cupti_extension(
    const Options& options, std::optional<c10::Device> device, Environment& env,
    std::function<void(const GpuActivity&)> observe = {});

// torch.profiler as a CUPTI client the collector can ask: profiling now, a schedule's warm-up
// included (Kineto registers its CUPTI callbacks and enables its kinds at the warm-up, before
// torch's profiler state says anything).
KnownClient torch_profiler_client();
// True while torch.profiler (Kineto) profiles or warms up in this process.
bool kineto_profiling() noexcept;
// Whether the profile prepared last asked for GPU activities (kernels, copies, memsets): false
// for torch.profiler's activities=[CPU]; true when not known (no profile prepared since the
// first torch_profiler_client(), which asks Kineto to say).
bool kineto_profile_records_gpu() noexcept;

}  // namespace fathom::detail
