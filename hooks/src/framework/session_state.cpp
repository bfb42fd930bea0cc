#include "framework/session_state.h"

#include <fathom/report_writers.h>
#include <fathom/version.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <iostream>
#include <mutex>
#include <utility>

#include "advise/advisor.h"
#include "analyze/achievement_derived.h"
#include "analyze/step_alarms.h"
#include "base/atomic_file.h"
#include "base/warning_sink.h"
#include "collect/clock.h"
#include "collect/host_info.h"
#include "collect/process_memory.h"
#include "framework/timeline_sink.h"
#include "report/report_stream.h"

namespace fathom::detail {
namespace {

// One color per phase, so the phases of a step read apart at a glance in Nsight Systems.
constexpr std::array<std::uint32_t, kPhaseCount> kPhaseColors{
    0xFFFDBF6F,  // data: light orange
    0xFFFFFF99,  // copy: yellow
    0xFF33A02C,  // forward: green
    0xFFE31A1C,  // backward: red
    0xFFCAB2D6,  // optimizer: lavender
};

// Innermost last. A vector, not a link in each scope: Python's scopes may end out of order.
// Each entry with its session's serial: a session may end on another thread than this one (a
// Session owned by the main thread, its loop on a worker), and its end cannot reach this
// thread's list; an entry whose session has ended is dropped when the list is next read.
struct CurrentSession {
  SessionState* state;
  std::uint64_t serial;
};
thread_local std::vector<CurrentSession> current_sessions;
thread_local std::uint64_t ends_seen = 0;  // session_ends when this thread last checked its list

// The links between scopes and their session (each session's holders_, the live sessions) are
// written on the scopes' threads and cleared by the session's end, on whatever thread that runs:
// one process-wide lock for those few words. Nothing else is done, and nothing called, under it.
std::mutex& links_mutex() noexcept {
  static auto* m = new std::mutex;  // never destroyed: sessions may end in static destructors
  return *m;
}
std::vector<std::uint64_t>& live_serials() noexcept {  // under links_mutex, ascending
  static auto* v = new std::vector<std::uint64_t>;
  return *v;
}
std::uint64_t next_serial = 1;               // under links_mutex
std::atomic<std::uint64_t> session_ends{0};  // sessions ended so far

// Begin callbacks in the order the extensions were added, the phase and step end callbacks in
// reverse (session_extension.h); extensions that wait for their feature are skipped.
template <typename Extensions, typename Call>
void forward_order(Extensions& extensions, Call&& call) {
  for (auto& e : extensions)
    if (e->engaged()) call(*e);
}
template <typename Extensions, typename Call>
void reverse_order(Extensions& extensions, Call&& call) {
  for (auto it = extensions.rbegin(); it != extensions.rend(); ++it)
    if ((*it)->engaged()) call(**it);
}

}  // namespace

SessionState* SessionState::current() noexcept {
  if (current_sessions.empty()) return nullptr;
  // No session ended anywhere since this thread last looked: its entries are all live.
  const std::uint64_t ends = session_ends.load(std::memory_order_acquire);
  if (ends != ends_seen) {
    std::lock_guard lock(links_mutex());
    const auto& live = live_serials();
    std::erase_if(current_sessions, [&](const CurrentSession& c) {
      return !std::binary_search(live.begin(), live.end(), c.serial);
    });
    ends_seen = ends;
  }
  return current_sessions.empty() ? nullptr : current_sessions.back().state;
}

void SessionState::push_current(SessionState* state) noexcept {
  try {
    current_sessions.push_back({state, state->serial_});
  } catch (...) {
    // Out of host memory: the scope's modules go without ranges, nothing else.
    detail::swallowed("framework/session_state.cpp: the thread's session stack");
  }
}

void SessionState::pop_current(SessionState* state) noexcept {
  for (auto it = current_sessions.rbegin(); it != current_sessions.rend(); ++it) {
    if (it->state == state && it->serial == state->serial_) {
      current_sessions.erase(std::next(it).base());
      return;
    }
  }
}

SessionState::SessionState(Options options, std::optional<c10::Device> device,
                           std::unique_ptr<AllocatorAccess> allocator)
    : warnings_(options.warnings()),
      options_(std::move(options)),
      printer_(options_),
      device_(device, std::move(allocator)) {
  report_.run_name = options_.run_name().empty() ? default_run_name() : options_.run_name();
  report_path_ = options_.report_dir() + "/" + report_.run_name + ".json";
  Environment& env = report_.environment;
  env.fathom_version = kVersion;
  env.torch_version = TORCH_VERSION;
  env.hostname = host_name();
  env.pid = ::getpid();
  env.started_at = utc_timestamp_iso8601();
  env.mode = options_.mode();
  env.nvtx = std::string(nvtx_level_name(options_.nvtx()));
  env.language = options_.loop_language();
  if (!device_.memory_not_measured().empty())
    env.not_measured.push_back({"device memory per phase (caching allocator)",
                                device_.memory_not_measured(), UnmeasuredId::DeviceMemory});
  if (options_.nvtx() >= NvtxLevel::Ops) {
    op_ranges_ = std::make_unique<OpRanges>(options_.record_shapes());
    if (!op_ranges_->active())
      env.not_measured.push_back(
          {"ATen op ranges",
           "no NVTX tool is attached, so nothing would receive them and fathom registers no op "
           "callback (no cost); run under Nsight Systems (nsys profile --trace=nvtx,cuda ...)",
           UnmeasuredId::OpRanges});
  }
  holders_.reserve(16);  // epoch, step, phase and a few traced modules: no allocation per scope
  {
    std::lock_guard lock(links_mutex());
    serial_ = next_serial++;
    live_serials().push_back(serial_);
  }
  epoch_name_ = nvtx::register_name("epoch");
  step_name_ = nvtx::register_name("step");
  data_gap_name_ = nvtx::register_name("data");
  for (Phase p : kAllPhases)
    phase_names_[static_cast<std::size_t>(p)] = nvtx::register_name(phase_name(p));
}

void SessionState::set_rank(const RankInfo& rank) {
  rank_ = rank;
  rank_range_suffix_ = rank_range_suffix(rank);
  report_path_ = options_.report_dir() + "/" + report_.run_name + rank_file_suffix(rank) + ".json";
}

void SessionState::claim_report_name() {
  const std::string& folder = options_.report_dir();
  if (const int removed = remove_stale_temporaries(folder))
    detail::warn("removed ", removed, " temporary file(s) that killed runs left in ", folder);
  const std::string base = report_.run_name + rank_file_suffix(rank_);
  name_lock_ = std::make_unique<RunNameLock>(folder, base);
  if (name_lock_->name() == base) return;
  const long holder = name_lock_->holder_of_base();
  const std::string by = holder ? " (pid " + std::to_string(holder) + ")" : std::string();
  if (rank_.distributed()) {
    // Every rank of a job shares the run name, and rank 0 merges by it: renaming one rank would
    // orphan its summaries. Say so instead.
    detail::warn("run name '", report_.run_name, "' is in use by another live run in ", folder, by,
                 ": both write ", report_path_, "; give each job its own FATHOM_RUN_NAME");
    return;
  }
  const std::string taken = report_.run_name;
  report_.run_name = name_lock_->name();
  report_path_ = folder + "/" + report_.run_name + ".json";
  detail::warn("run name '", taken, "' is in use by another live run in ", folder, by,
               "; this run writes ", report_path_, " instead");
}

SessionState::~SessionState() {
  release_scopes();
  finish_report();
}

bool SessionState::hold(SessionState** holder, const char* what) noexcept {
  try {
    std::lock_guard lock(links_mutex());
    holders_.push_back({holder, what});
    return true;
  } catch (...) {
    detail::swallowed("framework/session_state.cpp: a scope's registration");
    *holder = nullptr;
    return false;
  }
}

void SessionState::release(SessionState** holder) noexcept {
  std::lock_guard lock(links_mutex());
  // Scopes end innermost first: the search ends at the first entry but for Python's, driven by
  // hand.
  for (auto it = holders_.rbegin(); it != holders_.rend(); ++it) {
    if (it->state == holder) {
      holders_.erase(std::next(it).base());
      return;
    }
  }
}

void SessionState::release_scopes() noexcept {
  // This thread's entries now; other threads' when they next look (current()). Then the scopes
  // still open, on whatever thread, are cut off from this state under the links' lock, so a
  // scope made or ended on another thread meanwhile is either in holders_ (and nulled) or sees
  // null.
  std::erase_if(current_sessions, [&](const CurrentSession& c) { return c.serial == serial_; });
  std::vector<Holder> open;
  {
    std::lock_guard lock(links_mutex());
    auto& live = live_serials();
    if (auto it = std::lower_bound(live.begin(), live.end(), serial_);
        it != live.end() && *it == serial_)
      live.erase(it);
    session_ends.fetch_add(1, std::memory_order_release);
    for (const Holder& h : holders_) *h.state = nullptr;
    open.swap(holders_);
  }
  if (open.empty()) return;
  try {
    std::string kinds;
    for (const Holder& h : open)
      if (kinds.find(h.what) == std::string::npos)
        kinds += (kinds.empty() ? "" : ", ") + std::string(h.what);
    detail::warn(
        "the Session ended while its ", kinds,
        " scope(s) were still open (a Session destroyed "
        "inside the loop, e.g. a std::unique_ptr<Session> reset there): they end without effect",
        epoch_
            ? ", and epoch " + std::to_string(epoch_index_) + ", still open, is not in the report"
            : std::string(),
        "; let the Session outlive its scopes (declare it before them)");
  } catch (...) {
    detail::swallowed("framework/session_state.cpp: the open scopes' warning");
  }
  // The ranges those scopes would have ended, so that Nsight Systems' stack stays balanced.
  if (phase_ranges()) {
    for (std::size_t i = 0; i < open_phases_.size(); ++i) nvtx::pop();
    if (step_open_) nvtx::pop();
    if (epoch_) {
      if (data_gap_range_) nvtx::end(*data_gap_range_);
      nvtx::pop();
    }
  }
}

void SessionState::nested_scope(const char* what) noexcept {
  try {
    const bool epoch = std::string_view(what) == "epoch";
    detail::warn(
        epoch ? "an " : "a ", what, " scope opened inside ",
        epoch ? "epoch " + std::to_string(epoch_index_) : "step " + std::to_string(step_index_),
        ", which is still open: it is ignored, and ", epoch ? "its steps" : "its phases",
        " count in the open one. A scope ends where its block ends; give each ", what,
        " braces of its own: ",
        epoch ? "for (...) { auto e = session.epoch(); ... }"
              : "for (...) { auto step = e.step(n); ... }");
  } catch (...) {
    detail::swallowed("framework/session_state.cpp");
  }
}

void SessionState::begin_epoch() noexcept {
  forward_order(extensions_, [&](SessionExtension& e) { e.on_epoch_begin(epoch_index_); });
  step_index_ = 0;
  reset_peak_rss();
  const std::int64_t now = now_ns();
  epoch_.emplace(epoch_index_, now);
  alarmed_change_step_ = -1;
  alarmed_creep_ = false;
  data_gap_begin_ns_ = now;
  // The epoch's peak covers what happens outside every phase too; the gap before the first step
  // is the first data phase. (Intervals an epoch left open, had it never ended, close first.)
  device_.end_memory(epoch_memory_);
  device_.end_memory(data_gap_memory_);
  epoch_memory_ = device_.begin_memory();
  data_gap_memory_ = device_.begin_memory();
  if (phase_ranges()) {
    std::string label = "epoch " + std::to_string(epoch_index_) + rank_range_suffix_;
    nvtx::push(nvtx::Kind::Epoch, label.c_str());
    data_gap_range_ = nvtx::start(nvtx::Kind::Phase, data_gap_name_, kPhaseColors[0]);
  }
}

void SessionState::end_epoch(bool by_exception) noexcept {
  if (!epoch_) return;
  if (data_gap_range_) {
    nvtx::end(*data_gap_range_);
    data_gap_range_.reset();
  }
  if (phase_ranges()) nvtx::pop();
  // The gap after the last step belongs to no step: its peak counts in the epoch's alone.
  device_.end_memory(std::exchange(data_gap_memory_, -1));
  const std::optional<DeviceMemoryPeak> epoch_memory =
      device_.end_memory(std::exchange(epoch_memory_, -1));
  const std::size_t ended_before = report_.epochs.size();
  try {
    device_.drain(/*wait=*/true, [&](const PhaseRecord& r) { epoch_->add(r); });
    if (auto peak = peak_rss_bytes()) epoch_->set_peak_rss(*peak);
    EpochSummary summary = epoch_->finish(now_ns(), by_exception);
    // The step alarms over the whole epoch, before the advisor reads them.
    if (summary.series) analyze_step_series(*summary.series);
    // Measured over the whole epoch: higher than any phase's when the peak fell outside them,
    // and retries and OOMs counted once even where phases nest.
    if (epoch_memory) summary.device_memory = epoch_memory;
    Environment& env = report_.environment;
    FootprintParts footprint;
    forward_order(extensions_, [&](SessionExtension& e) { e.on_footprint(footprint, env); });
    summary.footprint = merge_footprint(footprint);
    // The epoch's report is built in stages, each extension reading what the ones before it
    // wrote (session_extension.h): these run in the order the extensions were added.
    forward_order(extensions_, [&](SessionExtension& e) { e.on_epoch_measured(summary, env); });
    // Throughput and MFU of the FLOPs counted (the counts are an extension's; the peak the core's).
    if (summary.flops) derive_flops_throughput(*summary.flops, summary, env);
    if (options_.mode() >= Mode::Suggest) summary.findings = advise(summary, env, env.not_measured);
    forward_order(extensions_, [&](SessionExtension& e) { e.on_epoch_end(summary, env); });
    order_findings(summary.findings);  // an extension may have added or applied one
    // Findings also land on the timeline, at the epoch's end, where Nsight Systems shows them.
    if (phase_ranges()) {
      for (const Finding& f : summary.findings)
        nvtx::mark(nvtx::Kind::Finding, ("fathom: " + f.title).c_str());
    }
    // An exception before the epoch's first step (a loader's, an eval's) leaves nothing
    // measured: kept, it would be the run's last report, the one printed in full at its end,
    // and say nothing but that it ended (issue 24).
    if (by_exception && summary.steps == 0)
      detail::warn("epoch ", summary.index,
                   " ended by an exception before its first step: no report for it");
    else
      report_.epochs.push_back(std::move(summary));
  } catch (const std::exception& e) {
    detail::warn("epoch ", epoch_index_, " could not be summarized: ", e.what());
  }
  epoch_.reset();
  step_open_ = false;  // a step scope still open (Python's, ended by hand) belongs to no epoch
  ++epoch_index_;
  // An exception may be on its way out of the program, past every destructor (std::terminate):
  // its epoch is waited onto the disk, the rest go without waiting.
  write_report(/*ended=*/report_.epochs.size() > ended_before, /*wait=*/by_exception);
}

// The epoch's one line, serialized here once (its cost does not grow with the run) and written
// and synced by the report writer's thread: the training thread never waits for the disk.
bool SessionState::post_epoch_line(const EpochSummary& summary) noexcept {
  try {
    if (journal_header_.empty()) {
      journal_header_ = format_journal_header(report_);
      journal_ = std::make_unique<ReportJournalFile>(report_path_, name_lock_.get());
    }
    auto task = [this, journal = journal_.get(), state = &journal_state_, header = journal_header_,
                 line = format_journal_epoch(summary, report_.environment),
                 index = summary.index]() noexcept {
      try {
        // The last line of a burst syncs them all (fdatasync covers what was written before).
        journal->append(header, line, /*sync=*/report_writer_.waiting() == 0);
        // Every line appended so far is still in the file (a journal made again after a failed
        // cut would hold fewer): this epoch may leave memory.
        if (journal->epoch_lines() != static_cast<std::size_t>(++journal_appends_))
          journal_broken_.store(true);
        if (!journal_broken_.load()) journaled_through_.store(index, std::memory_order_release);
        state->store(kOnDisk);
      } catch (const std::exception& e) {
        // The folder was checked at session start; if it went away since, say so and go on
        // training: a lost report must never stop the run.
        journal_broken_.store(true);
        state->store(kFailed);
        detail::warn(e.what());
      }
    };
    if (!report_writer_.try_post(std::move(task))) {
      ++journal_dropped_;
      detail::warn("the report writer is ", kPendingReportWrites,
                   " epochs behind (a slow or stalled disk?): epoch ", summary.index, " is not in ",
                   journal_->journal_path(), "; ", journal_dropped_,
                   " epoch(s) left out so far, all of them in ", report_path_,
                   " when the session ends");
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    detail::warn("epoch ", summary.index, " could not be written to the report: ", e.what());
    return false;
  }
}

// The session's end: the whole run once as one JSON document and the HTML page, after every line
// still queued, written into their files an epoch at a time: the epochs no longer in memory read
// back from the journal, the rest from the report in memory (so an epoch the queue left out is
// in it too). Nothing of the run is held twice: no document as one string, no tree of the run.
void SessionState::finish_report() noexcept {
  if (!journal_) return;  // no epoch ended: no report, as before
  try {
    // Run on the writer's thread after every line queued, or on this one once the writer is
    // idle: the journal is the writer's, and report_ no longer changes.
    auto task = [this]() noexcept {
      try {
        // The journal's first lines, with the epochs it missed put back in their places, then
        // the epochs still in memory.
        const detail::EachEpoch epochs =
            [this](const std::function<void(const EpochSummary&)>& each) {
              std::size_t kept = 0;
              journal_->for_each_epoch_line(journal_lines_out_, [&](std::string_view line) {
                const EpochSummary e = parse_journal_epoch(line, journal_->journal_path());
                while (kept < unjournaled_.size() && unjournaled_[kept].index < e.index)
                  each(unjournaled_[kept++]);
                each(e);
              });
              while (kept < unjournaled_.size()) each(unjournaled_[kept++]);
              for (const EpochSummary& e : report_.epochs) each(e);
            };
        // The page's overview is gathered while the JSON is written: the journal is read back
        // twice (JSON, then the page's panels), not three times.
        HtmlOverview overview;
        const detail::EachEpoch gathering =
            [&](const std::function<void(const EpochSummary&)>& each) {
              epochs([&](const EpochSummary& e) {
                overview.add(e);
                each(e);
              });
            };
        journal_->finish(
            [&](TextSink& out) { write_json_report(report_, gathering, out); },
            [&](TextSink& out) { write_html_report(report_, epochs, out, &overview); });
        journal_state_.store(kDocumentWritten);
      } catch (const std::exception& e) {
        journal_state_.store(kFailed);
        detail::warn(e.what());
      }
    };
    if (!report_writer_.try_post(task)) {
      report_writer_.flush();  // the queue is full: after what is in it, on this thread
      task();
    }
    report_writer_.flush();
  } catch (const std::exception& e) {
    detail::warn("the report could not be written at the session's end: ", e.what(),
                 "; the epochs are in ", journal_->journal_path());
  }
  // The whole run's files, named only once they are there (issue 17).
  try {
    const std::string html = report_path_.substr(0, report_path_.size() - 5) + ".html";
    printer_.session_ended(
        report_, journal_state_.load() == kDocumentWritten
                     ? "  report: " + report_path_ + " (for tools), " + html + " (for people)\n"
                     : "  report: not written (see fathom's warning)\n");
  } catch (...) {
    detail::swallowed("framework/session_state.cpp: the report line");
  }
}

void SessionState::write_report(bool ended, bool wait) noexcept {
  const bool written = ended && post_epoch_line(report_.epochs.back());
  if (ended && !written) {
    try {
      unposted_.push_back(report_.epochs.back().index);  // kept in memory to the end
    } catch (...) {
      journal_broken_.store(true);  // not known to be left out: nothing leaves memory
    }
  }
  if (wait) report_writer_.flush();
  // Only a file that is there (issue 17): the writer says whether the journal reached the disk;
  // until its first line did, the file is named as the one being written.
  const int state = journal_state_.load();
  std::string where;
  try {
    if (!written || state == kFailed)
      where = "  report: not written (see fathom's warning)\n";
    else if (state == kOnDisk)
      where = "  report: " + journal_->journal_path() + " (the run so far; " + report_path_ +
              " and its .html when the session ends)\n";
    else
      where = "  report: being written to " + journal_->journal_path() + "\n";
  } catch (...) {
    detail::swallowed("framework/session_state.cpp: the report line");
  }
  printer_.epoch_ended(report_, where);
  forget_journaled_epochs();
}

void SessionState::forget_journaled_epochs() noexcept {
  if (report_.epochs.size() <= kEpochsInMemory || journal_broken_.load()) return;
  const std::int64_t through = journaled_through_.load(std::memory_order_acquire);
  std::size_t n = 0;
  try {
    for (; report_.epochs.size() - n > kEpochsInMemory; ++n) {
      EpochSummary& e = report_.epochs[n];
      if (e.index > through) break;  // its line is not on disk yet
      const auto unposted = std::find(unposted_.begin(), unposted_.end(), e.index);
      if (unposted == unposted_.end()) {
        ++journal_lines_out_;
        continue;
      }
      unjournaled_.push_back(std::move(e));
      unposted_.erase(unposted);
    }
  } catch (...) {
    detail::swallowed("framework/session_state.cpp: an epoch kept for the session's end");
  }
  report_.epochs.erase(report_.epochs.begin(),
                       report_.epochs.begin() + static_cast<std::ptrdiff_t>(n));
}

void SessionState::begin_step() noexcept {
  if (!epoch_) return;
  step_open_ = true;
  const std::int64_t now = now_ns();
  if (data_gap_range_) {
    nvtx::end(*data_gap_range_);
    data_gap_range_.reset();
  }
  PhaseRecord gap;
  gap.phase = Phase::Data;
  gap.step = step_index_;
  gap.begin_ns = data_gap_begin_ns_;
  gap.end_ns = now;
  gap.inferred = true;
  gap.device_memory = device_.end_memory(std::exchange(data_gap_memory_, -1));
  epoch_->add(gap);
  if (phase_ranges()) {
    std::string label = "step " + std::to_string(step_index_) + rank_range_suffix_;
    nvtx::push(nvtx::Kind::Step, label.c_str());
  }
  forward_order(extensions_, [&](SessionExtension& e) { e.on_step_begin(step_index_); });
}

void SessionState::end_step(std::int64_t begin_ns, std::int64_t samples, bool failed) noexcept {
  step_open_ = false;
  if (!epoch_) return;
  const std::int64_t now = now_ns();
  if (phase_ranges()) {
    nvtx::pop();
    data_gap_range_ = nvtx::start(nvtx::Kind::Phase, data_gap_name_, kPhaseColors[0]);
  }
  reverse_order(extensions_, [&](SessionExtension& e) { e.on_step_end(step_index_, failed); });
  const StepRecord step{step_index_, samples, begin_ns, now, failed};
  epoch_->add(step);
  forward_order(extensions_, [&](SessionExtension& e) { e.on_step_timed(step); });
  device_.drain(/*wait=*/false, [&](const PhaseRecord& r) {
    if (epoch_) epoch_->add(r);
  });
  check_alarms(now);
  data_gap_begin_ns_ = now;
  device_.end_memory(data_gap_memory_);  // closed by begin_step, unless it never came
  data_gap_memory_ = device_.begin_memory();
  ++step_index_;
}

int SessionState::begin_phase(Phase p) noexcept {
  if (!open_phases_.empty()) overlapping_phase(p);
  try {
    open_phases_.push_back(p);
  } catch (...) {
    detail::swallowed("framework/session_state.cpp");
  }
  if (phase_ranges())
    nvtx::push(nvtx::Kind::Phase, phase_names_[static_cast<std::size_t>(p)],
               kPhaseColors[static_cast<std::size_t>(p)]);
  forward_order(extensions_, [&](SessionExtension& e) { e.on_phase_begin(p); });
  return device_.begin();
}

void SessionState::end_phase(Phase p, std::int64_t begin_ns, int device_slot,
                             bool aborted) noexcept {
  PhaseRecord r;
  r.phase = p;
  r.step = step_index_;
  r.begin_ns = begin_ns;
  r.end_ns = now_ns();
  r.aborted = aborted;
  for (auto it = open_phases_.rbegin(); it != open_phases_.rend(); ++it) {
    if (*it == p) {
      open_phases_.erase(std::next(it).base());
      break;
    }
  }
  reverse_order(extensions_, [&](SessionExtension& e) { e.on_phase_end(p, aborted); });
  if (!device_.enabled()) r.rss_bytes = resident_.at(r.end_ns);
  if (phase_ranges()) nvtx::pop();
  if (device_slot >= 0) {
    device_.end(device_slot, r);  // delivered once the device time is known
  } else if (epoch_) {
    epoch_->add(r);
  }
}

void SessionState::overlapping_phase(Phase p) noexcept {
  try {
    const std::string inner(phase_name(p)), outer(phase_name(open_phases_.back()));
    // A scope ends where its block ends: `auto f = step.forward();` without braces stays open
    // to the step's end, and every later phase would be counted inside it as well.
    const std::string why =
        "phase " + inner + " opened in step " + std::to_string(step_index_) + " while phase " +
        outer +
        " is still open: its time is counted in both. A phase scope ends where its block ends; "
        "give each phase braces of its own: { auto f = step.forward(); ... } "
        "{ auto b = step.backward(); ... }";
    detail::warn("overlapping phases: ", why);
    if (!said_overlap_) {
      report_.environment.not_measured.push_back({"separate phase times", why});
      said_overlap_ = true;
    }
  } catch (...) {
    detail::swallowed("framework/session_state.cpp");
  }
}

void SessionState::add_copy(const CopyRecord& r) {
  if (epoch_) epoch_->add(r);
}

void SessionState::watch_module(const void* module, const std::string& label) {
  watched_modules_[module] = WatchedModule{nvtx::register_name(label), label};
}

const SessionState::WatchedModule* SessionState::watched_module(const void* module) const noexcept {
  auto it = watched_modules_.find(module);
  return it == watched_modules_.end() ? nullptr : &it->second;
}

// The step alarms during the epoch, so that Nsight Systems shows the step where one first held and
// the user hears of it before the epoch ends. Checked every kAlarmCheckSteps steps and at most
// once per kAlarmCheckNs: a check (a rank test over at most 2,048 points, a trend test over at
// most 512) costs well under a millisecond, so this stays below 1% even for tiny steps.
void SessionState::check_alarms(std::int64_t now) noexcept {
  constexpr std::int64_t kAlarmCheckSteps = 128;
  constexpr std::int64_t kAlarmCheckNs = 100'000'000;
  if (!epoch_ || (step_index_ + 1) % kAlarmCheckSteps != 0 ||
      now - last_alarm_check_ns_ < kAlarmCheckNs)
    return;
  last_alarm_check_ns_ = now;
  try {
    const StepSeries& s = epoch_->series();
    if (auto c = find_step_change(s); c && c->step > alarmed_change_step_) {
      alarmed_change_step_ = c->step;
      std::string msg = step_change_text(*c);
      if (!c->phase.empty()) msg += ", the phase that grew: " + c->phase;
      if (phase_ranges()) nvtx::mark(nvtx::Kind::Finding, ("fathom: " + msg).c_str());
      if (known_.timeline) known_.timeline->alarm(msg);
      detail::warn("epoch ", epoch_index_, ": ", msg);
    }
    if (!alarmed_creep_) {
      if (auto c = find_memory_creep(s)) {
        alarmed_creep_ = true;
        const std::string msg = memory_creep_text(*c, s.memory);
        if (phase_ranges()) nvtx::mark(nvtx::Kind::Finding, ("fathom: " + msg).c_str());
        if (known_.timeline) known_.timeline->alarm(msg);
        detail::warn("epoch ", epoch_index_, ": ", msg);
      }
    }
  } catch (...) {
    detail::swallowed("step alarms");
  }
}

}  // namespace fathom::detail
