#pragma once
// What a Session holds while it runs. Scopes reach it through a raw pointer that is null when
// fathom is off, so an off scope is one branch.
#include <fathom/options.h>
#include <fathom/rank_info.h>
#include <fathom/report.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "aggregate/epoch_accumulator.h"
#include "base/run_name.h"
#include "base/warning_sink.h"
#include "collect/nvtx.h"
#include "collect/resident_sampler.h"
#include "formats/background_writer.h"
#include "formats/report_journal_file.h"
#include "framework/allocator_access.h"
#include "framework/device_meter.h"
#include "framework/op_ranges.h"
#include "framework/report_printer.h"
#include "framework/session_extension.h"

namespace fathom::detail {

class AmpExtension;
class CheckpointExtension;
class DistributedExtension;
class FootprintExtension;
class TimelineSink;

class SessionState {
 public:
  // allocator: what the device meter reads memory peaks from (Session passes the device's caching
  // allocator, tests a fake).
  SessionState(Options options, std::optional<c10::Device> device,
               std::unique_ptr<AllocatorAccess> allocator);
  ~SessionState();

  const Options& options() const noexcept { return options_; }
  bool phase_ranges() const noexcept { return options_.nvtx() >= NvtxLevel::Phases; }
  bool module_ranges() const noexcept { return options_.nvtx() >= NvtxLevel::Modules; }

  void begin_epoch() noexcept;
  void end_epoch(bool by_exception) noexcept;
  bool epoch_open() const noexcept { return epoch_.has_value(); }
  bool step_open() const noexcept { return step_open_; }
  // An epoch scope inside an open epoch, or a step inside an open step: the warning that it is
  // ignored, with the fix (the scopes do the ignoring).
  void nested_scope(const char* what) noexcept;
  // A scope keeps its state at *holder (what: "epoch", "step", "phase", "module") from hold to
  // release. The state's end sets every held pointer to null, so a scope that outlives its session
  // ends as a no-op instead of reading freed memory. hold returns false, and nulls *holder, when
  // there is no memory to register it: that scope then does nothing.
  bool hold(SessionState** holder, const char* what) noexcept;
  void release(SessionState** holder) noexcept;
  void begin_step() noexcept;
  void end_step(std::int64_t begin_ns, std::int64_t samples, bool failed) noexcept;
  int begin_phase(Phase p) noexcept;  // returns the device slot
  // A phase scope is open in this step (to_device then copies inside it, no copy phase of its own).
  bool phase_open() const noexcept { return !open_phases_.empty(); }
  void end_phase(Phase p, std::int64_t begin_ns, int device_slot, bool aborted) noexcept;
  void add_copy(const CopyRecord& r);

  void watch_module(const void* module, const std::string& label);
  // What watch() learned of a module: its registered NVTX name and its label (the trace file's
  // range name); null for a module no watch() saw.
  struct WatchedModule {
    nvtx::Name name;
    std::string label;
  };
  const WatchedModule* watched_module(const void* module) const noexcept;

  // Extensions run in the order they were added (end callbacks in reverse, see
  // session_extension.h); the state owns them. Returns e, for the typed pointers below.
  template <typename T>
  T* add_extension(std::unique_ptr<T> e) {
    T* raw = e.get();
    if (raw) extensions_.push_back(std::move(e));
    return raw;
  }
  // The extensions other code reaches (the public functions of their features, the scopes, each
  // other), by type: filled once in Session's constructor, null where a feature is absent.
  struct Extensions {
    FootprintExtension* footprint = nullptr;
    AmpExtension* amp = nullptr;
    CheckpointExtension* checkpoint = nullptr;
    DistributedExtension* distributed = nullptr;
    TimelineSink* timeline = nullptr;  // the trace file (Options::trace_file)
  };
  Extensions& extensions() noexcept { return known_; }
  // Every extension, in the order added, engaged or not (Session::watch hands them what it saw).
  template <typename F>
  void each_extension(F&& f) {
    for (auto& e : extensions_) f(*e);
  }
  const Extensions& extensions() const noexcept { return known_; }

  // Distributed jobs (distributed.cpp): the rank goes into the report file name and the NVTX
  // epoch and step labels. Set before the first epoch.
  void set_rank(const RankInfo& rank);
  const RankInfo& rank() const noexcept { return rank_; }
  // Once the rank is known (the end of Session's constructor): removes the temporaries killed runs
  // left in the report folder and locks this run's report name; a name another live run holds
  // becomes `<name>-N`, said in a warning and in the report's run_name.
  void claim_report_name();

  // CPU runs' resident-memory readings at phase ends (benchmarks count them).
  const ResidentSampler& resident() const noexcept { return resident_; }
  RunReport& report() noexcept { return report_; }
  const std::string& report_path() const noexcept { return report_path_; }
  std::int64_t step_index() const noexcept { return step_index_; }
  // Waits until every ended epoch's line is in the journal on disk (session.h, flush_report).
  void flush_report() noexcept {
    report_writer_.flush();
    for (const auto& e : extensions_) e->on_flush();
  }

  // The session whose epoch or step scope is innermost on this thread, or null: ModuleScope,
  // fathom::forward and fathom::block take no session and reach theirs through it. Epoch and
  // step scopes push their state and pop it when they end; a pop removes that state's latest
  // entry, so scopes that end out of order (Python's, driven by hand) cannot corrupt the stack.
  static SessionState* current() noexcept;
  static void push_current(SessionState* state) noexcept;
  static void pop_current(SessionState* state) noexcept;

 private:
  void write_report(bool ended, bool wait) noexcept;
  bool post_epoch_line(const EpochSummary& summary) noexcept;  // false: not queued (warned)
  void forget_journaled_epochs() noexcept;  // the oldest epochs out of memory, once on disk
  void finish_report() noexcept;
  void overlapping_phase(Phase p) noexcept;  // the warning and report note for a nested phase
  void release_scopes() noexcept;            // at the end: the scopes still open become no-ops

  // First member: the session's warnings go where its options say from the first line of the
  // constructor until every extension is gone.
  detail::WarningScope warnings_;
  Options options_;
  // Destroyed after the last report is written (members end in reverse order).
  std::unique_ptr<RunNameLock> name_lock_;
  RunReport report_;
  ReportPrinter printer_;
  std::string report_path_;
  // The report's files (report_journal_file.h), touched only by tasks on report_writer_'s thread
  // once the first epoch ended; destroyed after the writer has run its last task.
  std::unique_ptr<ReportJournalFile> journal_;
  std::string journal_header_;        // the journal's first line, made at the first epoch's end
  std::int64_t journal_dropped_ = 0;  // epochs the full queue kept out of the journal
  // What the writer last did, for the terminal's "report:" line: set on its thread.
  static constexpr int kNothingYet = 0, kOnDisk = 1, kFailed = 2, kDocumentWritten = 3;
  std::atomic<int> journal_state_{kNothingYet};
  // The last kEpochsInMemory ended epochs stay in report_ in full (the live summary, Auto, Python
  // read them); an older one leaves memory once its line is in the journal, and the session's end
  // reads it back from there (issue 24: the report in memory grew ~11 KiB an epoch).
  static constexpr std::size_t kEpochsInMemory = 16;
  // The index of the last epoch whose line the writer appended, with every line posted before it:
  // set on the writer's thread; -1 before the first. After a failed append (journal_broken_) it
  // stays where it was and no epoch leaves memory any more: the journal may have lost lines.
  std::atomic<std::int64_t> journaled_through_{-1};
  std::atomic<bool> journal_broken_{false};
  std::int64_t journal_appends_ = 0;  // the writer's thread's count of its appends
  // Epochs whose line never went to the writer (its queue was full): kept for the session's end
  // in unjournaled_ once they leave report_.epochs; their indices are in unposted_ until then.
  std::vector<std::int64_t> unposted_;
  std::vector<EpochSummary> unjournaled_;
  std::size_t journal_lines_out_ = 0;  // the epochs gone from memory: the journal's first lines
  // Epoch lines waiting for the disk: enough for a disk stalled for many short epochs; a stall
  // beyond it costs the journal lines, never the training (the end's document has every epoch).
  static constexpr std::size_t kPendingReportWrites = 64;
  BackgroundWriter report_writer_{kPendingReportWrites};
  RankInfo rank_;
  std::string rank_range_suffix_;  // " [rank 3]" in a distributed job
  DeviceMeter device_;
  ResidentSampler resident_;  // CPU runs: resident memory at phase ends, sampled
  std::unique_ptr<OpRanges> op_ranges_;
  std::vector<std::unique_ptr<SessionExtension>> extensions_;
  Extensions known_;
  std::optional<EpochAccumulator> epoch_;
  void check_alarms(std::int64_t now) noexcept;
  // The in-run step alarms (check_alarms): when last checked, and what was already said.
  std::int64_t last_alarm_check_ns_ = 0;
  std::int64_t alarmed_change_step_ = -1;
  bool alarmed_creep_ = false;
  // The phases open now, innermost last: a second one opened is the misuse begin_phase names.
  std::vector<Phase> open_phases_;
  bool step_open_ = false;
  // The scopes holding this state (hold), innermost last.
  struct Holder {
    SessionState** state;
    const char* what;
  };
  std::vector<Holder> holders_;  // under the links' lock (session_state.cpp)
  std::uint64_t serial_ = 0;     // this state among all the process's: addresses are reused
  bool said_overlap_ = false;
  std::int64_t epoch_index_ = 0;
  std::int64_t step_index_ = 0;
  std::int64_t data_gap_begin_ns_ = 0;  // end of the last step (or the epoch's start)
  int data_gap_memory_ = -1;            // the device meter's interval over that gap
  int epoch_memory_ = -1;               // and over the whole epoch, phases or not
  std::optional<nvtx::RangeId> data_gap_range_;
  std::unordered_map<const void*, WatchedModule> watched_modules_;
  nvtx::Name epoch_name_, step_name_, data_gap_name_;
  std::array<nvtx::Name, kPhaseCount> phase_names_{};
};

}  // namespace fathom::detail
