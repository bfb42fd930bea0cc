#include <fathom/distributed.h>
#include <fathom/error.h>
#include <fathom/job_merge.h>
#include <fathom/job_report.h>
#include <fathom/report.h>
#include <fathom/report_writers.h>
#include <fathom/session.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "aggregate/comm_ledger.h"
#include "aggregate/step_samples.h"
#include "analyze/summarize_rank.h"
#include "base/atomic_file.h"
#include "base/terminal_text.h"
#include "base/warning_sink.h"
#include "collect/clock.h"
#include "distributed/distributed_extension.h"
#include "distributed/summary_exchange.h"
#include "formats/background_writer.h"
#include "formats/rank_summary_bytes.h"
#include "framework/session_access.h"
#include "framework/session_state.h"

namespace fathom {
namespace detail {
namespace {

std::string rank_text(const RankInfo& r) {
  return std::to_string(r.rank) + " of " + std::to_string(r.world_size);
}

}  // namespace

// Every session has one (construction is complete); it acts once the job is distributed, by
// RANK / WORLD_SIZE or by use_process_group / use_store.
class DistributedExtension final : public SessionExtension {
 public:
  DistributedExtension(SessionState& state, RankInfo rank) : state_(state), rank_(rank) {}

  bool engaged() const noexcept override { return rank_.distributed() || exchange_.has_value(); }

  void connect(c10::intrusive_ptr<c10d::Store> store, RankInfo rank, DistributedOptions options,
               bool host_comm_timing) {
    if (!(rank == rank_)) {
      // The report file is first written at the first epoch's end; renaming it after that
      // would leave half the run under the old name.
      if (!state_.report().epochs.empty())
        throw Error(
            "use_process_group / use_store after the first epoch ended would rename the "
            "report files mid-run; hand fathom the process group before the first epoch");
      rank_ = rank;
      state_.set_rank(rank);
    }
    static std::atomic<int> sessions{0};
    const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
    const std::string prefix = "fathom/" + std::string(restart ? restart : "0") + "/" +
                               std::to_string(sessions.fetch_add(1)) + "/";
    exchange_.emplace(std::move(store), rank_,
                      merge_timeout_from_environment(options.merge_timeout()), prefix);
    host_comm_timing_ = host_comm_timing;
    job_->run_name = state_.report().run_name;
    job_->world_size = rank_.world_size;
    job_->report.run_name = job_->run_name;
    job_->report.world_size = rank_.world_size;
    job_path_ = state_.options().report_dir() + "/" + job_->run_name + ".job.json";
  }

  const std::shared_ptr<CommLedger>& ledger() const noexcept { return ledger_; }
  bool host_comm_timing() const noexcept { return host_comm_timing_; }
  const RankInfo& rank() const noexcept { return rank_; }

  void on_epoch_begin(std::int64_t) noexcept override { work_.clear(); }

  // Each step's work (its time less its communication wait) for the median the ranks are
  // compared on: robust to a warm-up step or one hiccup.
  void on_step_begin(std::int64_t) noexcept override {
    step_begin_ns_ = now_ns();
    wait_at_step_begin_ns_ = ledger_->waited_ns();
  }
  void on_step_end(std::int64_t, bool failed) noexcept override {
    if (failed) return;
    const std::int64_t wait = ledger_->waited_ns() - wait_at_step_begin_ns_;
    work_.add(static_cast<double>(now_ns() - step_begin_ns_ - wait) / 1e6);
  }

  void on_epoch_end(EpochSummary& epoch, Environment& env) noexcept override {
    try {
      CommStats comm = ledger_->take();
      if (!host_comm_timing_) comm = {};  // NCCL: the host clock saw launches only
      if (!exchange_) {
        note(env, "job report (every rank's epoch merged on rank 0)",
             "no process group was handed to fathom: call fathom::use_process_group(session, pg) "
             "(fathom/distributed.h) before the first epoch");
        return;
      }
      // Under NCCL the host's step times say nothing about the GPU's communication: ranks are
      // then compared on the epoch's mean, less the GPU-measured exposed communication.
      const std::optional<double> median = host_comm_timing_ ? work_.median() : std::nullopt;
      RankSummary mine = summarize_rank(epoch, rank_, comm, env.hostname, env.pid, median);
      if (mine.comm.source == CommSource::None)
        note(env, "communication time per rank",
             host_comm_timing_
                 ? "no collective went through fathom::track_collective / wait_collective"
                 : "NCCL runs on the GPU and CUPTI recorded no NCCL kernel");
      if (rank_.rank != 0) {
        const std::string error = exchange_->post(epoch.index, serialize_rank_summary(mine));
        if (!error.empty() && !post_failed_) {
          post_failed_ = true;
          detail::warn("rank ", rank_.rank, " could not send its epoch summary to rank 0 ",
                       "(the job report will name it missing): ", error);
        }
        return;
      }
      merge_and_write(std::move(mine), epoch.index);
    } catch (const std::exception& e) {
      detail::warn("job report for epoch ", epoch.index, " failed: ", e.what());
    }
  }

 private:
  void merge_and_write(RankSummary mine, std::int64_t epoch) {
    Gathered g = exchange_->gather(epoch);
    if (!g.error.empty())
      detail::warn("rank 0 could not read the other ranks' summaries from the store: ", g.error);
    std::vector<RankSummary> all;
    all.reserve(g.payloads.size() + 1);
    all.push_back(std::move(mine));
    std::vector<UnreadableRank> unreadable;
    for (auto& [r, bytes] : g.payloads) {
      try {
        all.push_back(parse_rank_summary(bytes));
      } catch (const std::exception& e) {
        unreadable.push_back({r, e.what()});
      }
    }
    // The wait is known before the merge, so the merge's findings carry it.
    const MergeWait wait{g.waited_ms, static_cast<std::int64_t>(exchange_->timeout().count())};
    JobEpoch merged =
        merge_rank_summaries(epoch, rank_.world_size, std::move(all), std::move(unreadable), wait);
    // The printed summary reads this epoch alone; the file holds the run, rewritten by the
    // writer's thread (issue 24: every epoch's end serialized and synced the whole job here).
    JobReport latest;
    latest.run_name = job_->run_name;
    latest.world_size = job_->world_size;
    latest.epochs.push_back(merged);
    {
      std::lock_guard lock(job_->mutex);
      job_->report.epochs.push_back(std::move(merged));
    }
    if (!job_->rewrite_queued.exchange(true) &&
        !writer_.try_post([job = job_, path = job_path_]() noexcept { rewrite(*job, path); }))
      job_->rewrite_queued = false;  // the next epoch's end posts it again: the file only lags
    if (state_.options().print_report()) {
      const std::string text = format_job_terminal(latest);
      // Standard error, as the session's own report (report_printer.cpp).
      std::fflush(stdout);
      std::fwrite(text.data(), 1, text.size(), stderr);
      std::fprintf(stderr, "  job report: %s\n\n", detail::printed_path(job_path_).c_str());
      std::fflush(stderr);
    }
  }

  void note(Environment& env, const char* what, const char* why) {
    for (const Unmeasured& u : env.not_measured)
      if (u.what == what) return;
    env.not_measured.push_back({what, why});
  }

  SessionState& state_;
  RankInfo rank_;
  std::optional<SummaryExchange> exchange_;
  std::shared_ptr<CommLedger> ledger_ = std::make_shared<CommLedger>();
  bool host_comm_timing_ = true;
  bool post_failed_ = false;
  StepSamples work_;
  std::int64_t step_begin_ns_ = 0;
  std::int64_t wait_at_step_begin_ns_ = 0;
  // The job report as rank 0's writer thread writes it: the training thread appends an epoch
  // (under the mutex) and posts one rewrite at a time.
  struct Job {
    std::string run_name;
    int world_size = 0;
    std::mutex mutex;
    JobReport report;
    std::atomic<bool> rewrite_queued{false};
  };
  static void rewrite(Job& job, const std::string& path) noexcept {
    job.rewrite_queued = false;  // an epoch appended from here on posts the next rewrite
    try {
      std::string text;
      {
        std::lock_guard lock(job.mutex);
        text = format_job_json(job.report);
      }
      write_file_atomically(path, text);
    } catch (const std::exception& e) {
      detail::warn(e.what());  // a lost report must never stop the run
    }
  }
  void on_flush() noexcept override { writer_.flush(); }

  std::shared_ptr<Job> job_ = std::make_shared<Job>();
  std::string job_path_;
  BackgroundWriter writer_{4};  // last: its end writes what is queued while job_ still lives
};

namespace {

// The session's extension while it acts (see DistributedExtension::engaged), else null.
DistributedExtension* find(const Session& session) noexcept {
  SessionState* state = SessionAccess::state(session);
  DistributedExtension* e = state ? state->extensions().distributed : nullptr;
  return e && e->engaged() ? e : nullptr;
}

}  // namespace

DistributedExtension* add_distributed_extension(SessionState& state) {
  const RankInfo rank = rank_from_environment();
  if (rank.distributed()) state.set_rank(rank);
  return state.add_extension(std::make_unique<DistributedExtension>(state, rank));
}

}  // namespace detail

namespace {

void attach(Session& session, const c10::intrusive_ptr<c10d::Store>& store, RankInfo rank,
            const DistributedOptions& options, bool host_comm_timing) {
  if (!store)
    throw Error("use_store: the store is null; pass the job's c10d store (e.g. its TCPStore)");
  if (rank.world_size < 1 || rank.rank < 0 || rank.rank >= rank.world_size)
    throw Error("use_store: rank " + detail::rank_text(rank) +
                " is impossible; ranks run from 0 to world_size-1");
  detail::SessionState* state = detail::SessionAccess::state(session);
  if (!state || !state->extensions().distributed) return;
  const RankInfo env = state->rank();
  if (env.distributed() && (env.rank != rank.rank || env.world_size != rank.world_size))
    throw Error("the process group is rank " + detail::rank_text(rank) +
                " but RANK / WORLD_SIZE say rank " + detail::rank_text(env) +
                "; hand fathom the job's world group, or fix the launcher's variables");
  state->extensions().distributed->connect(store, rank, options, host_comm_timing);
}

}  // namespace

void use_store(Session& session, const c10::intrusive_ptr<c10d::Store>& store, RankInfo rank,
               DistributedOptions options) {
  attach(session, store, rank, options, /*host_comm_timing=*/true);
}

void use_process_group(Session& session, const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                       DistributedOptions options) {
  if (!group)
    throw Error(
        "use_process_group: the process group is null; create it before handing it to fathom");
  detail::SessionState* state = detail::SessionAccess::state(session);
  if (!state) return;
  c10::intrusive_ptr<c10d::Store> store = group->getStore();
  if (!store)
    throw Error(
        "use_process_group: this process group holds no store; build it with "
        "c10d::ProcessGroup(store, rank, size), or call fathom::use_store(session, store, rank)");
  RankInfo rank{group->getRank(), group->getRank(), group->getSize()};
  if (state->rank().distributed()) rank.local_rank = state->rank().local_rank;
  // NCCL works on the GPU: a host clock around it measures the launch, not the transfer.
  const bool nccl = group->getBackendName().find("nccl") != std::string::npos;
  attach(session, store, rank, options, /*host_comm_timing=*/!nccl);
}

RankInfo session_rank(const Session& session) noexcept {
  detail::SessionState* state = detail::SessionAccess::state(session);
  return state ? state->rank() : RankInfo{};
}

const c10::intrusive_ptr<c10d::Work>& track_collective(Session& session,
                                                       const c10::intrusive_ptr<c10d::Work>& work,
                                                       std::int64_t bytes) noexcept {
  detail::DistributedExtension* ext = detail::find(session);
  if (!ext || !work) return work;
  std::shared_ptr<CommLedger> ledger = ext->ledger();
  const std::int64_t begin = now_ns();
  if (!ext->host_comm_timing()) {
    ledger->add_collective(begin, begin, bytes);
    return work;
  }
  try {
    // The future completes on the backend's thread when the collective is done: the true end,
    // even when the training loop waits for it much later.
    work->getFuture()->addCallback([ledger, begin, bytes](c10::ivalue::Future&) {
      ledger->add_collective(begin, now_ns(), bytes);
    });
  } catch (const std::exception&) {
    ledger->add_collective(begin, begin, bytes);  // a backend without futures: counted, not timed
  }
  return work;
}

void wait_collective(Session& session, c10d::Work& work) {
  detail::DistributedExtension* ext = detail::find(session);
  const std::int64_t begin = now_ns();
  struct Record {
    detail::DistributedExtension* ext;
    std::int64_t begin;
    ~Record() {
      if (ext) ext->ledger()->add_wait(now_ns() - begin);
    }
  } record{ext, begin};
  work.wait();
}

}  // namespace fathom
