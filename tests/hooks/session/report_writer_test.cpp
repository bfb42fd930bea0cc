// The report's writes never hold up training: fsync stands in for a slow disk here (this test
// binary defines it, so every fsync and fdatasync fathom makes comes through it), and no epoch's
// end may call it on the training thread or wait for it. And a run killed at any moment leaves a
// report that reads whole, holding the epochs it had ended.
#include <dlfcn.h>
#include <fathom/distributed.h>
#include <fathom/fathom.h>
#include <fathom/report_writers.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include "base/file_system.h"
#include "session_fixture.h"

namespace {

// The stalled disk: once armed, each sync waits until the test opens the gate (at most 5 s, so
// that code which syncs on the training thread fails the test rather than hanging it). The test
// opens the gate only after the epochs ended: no clock decides whether they waited.
std::atomic<bool> sync_armed{false};
std::mutex sync_mutex;
std::condition_variable sync_gate;
bool gate_open = false;
int sync_timeouts = 0;                      // syncs the gate never let through (under sync_mutex)
std::vector<std::thread::id> sync_threads;  // every caller, while armed

void slow_sync() {
  if (!sync_armed.load()) return;
  std::unique_lock<std::mutex> lock(sync_mutex);
  sync_threads.push_back(std::this_thread::get_id());
  if (!sync_gate.wait_for(lock, std::chrono::seconds(5), [] { return gate_open; }))
    ++sync_timeouts;  // nobody opened the gate: the training thread was waiting for this sync
}

void open_gate() {
  {
    std::lock_guard<std::mutex> lock(sync_mutex);
    gate_open = true;
  }
  sync_gate.notify_all();
}

// Stalls the disk from here until open_gate().
void stall_disk() {
  {
    std::lock_guard<std::mutex> lock(sync_mutex);
    sync_threads.clear();
    gate_open = false;
    sync_timeouts = 0;
  }
  sync_armed = true;
}

bool synced_on_this_thread() {
  std::lock_guard<std::mutex> lock(sync_mutex);
  bool here = false;
  for (auto id : sync_threads) here |= id == std::this_thread::get_id();
  return here;
}

template <typename F>
F real(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int fsync(int fd) {
  static const auto next = real<int (*)(int)>("fsync");
  slow_sync();
  return next(fd);
}

extern "C" int fdatasync(int fd) {
  static const auto next = real<int (*)(int)>("fdatasync");
  slow_sync();
  return next(fd);
}

namespace fathom {
namespace {

using test::SessionTest;

void one_step_epoch(Session& session) {
  auto e = session.epoch();
  auto step = e.step(1);
  auto f = step.forward();
}

TEST_F(SessionTest, ASlowDiskNeverHoldsUpAnEpochsEnd) {
  constexpr int kEpochs = 4;
  {
    Session session(Options().report_dir(dir()).run_name("slow").print_report(false));
    stall_disk();
    for (int i = 0; i < kEpochs; ++i) one_step_epoch(session);
    // Every epoch ended while the disk was stalled: none of them waited for a sync.
    EXPECT_FALSE(synced_on_this_thread()) << "an epoch's end synced on the training thread";
    open_gate();
  }  // the session's end waits for the writer: the whole run on disk, then
  sync_armed = false;
  {
    std::lock_guard<std::mutex> lock(sync_mutex);
    // The disk was used (each epoch's line synced, then the document and the page), never by the
    // training thread: not at an epoch's end, not at the session's.
    EXPECT_GE(sync_threads.size(), static_cast<std::size_t>(kEpochs));
    for (auto id : sync_threads) EXPECT_NE(id, std::this_thread::get_id());
    // And the training thread never waited for the writer's sync: the gate opened after the
    // epochs, so a sync it held back timed out only if an epoch's end waited on it.
    EXPECT_EQ(sync_timeouts, 0) << "an epoch's end waited for the report writer";
  }
  EXPECT_FALSE(fs::exists(dir() + "/slow.jsonl"));
  const RunReport back = read_report_file(dir() + "/slow.json");
  ASSERT_EQ(back.epochs.size(), static_cast<std::size_t>(kEpochs));
  EXPECT_TRUE(fs::exists(dir() + "/slow.html"));
}

// Issue 24: the report in memory grew by every epoch, and the session's end wrote the whole run
// from it. The session keeps its last epochs; the earlier ones are in the journal, and the end
// reads them back from there into a document of the whole run, the bytes the run in memory gave.
TEST_F(SessionTest, TheReportInMemoryKeepsTheLastEpochsAndTheDocumentHoldsTheRun) {
  constexpr int kEpochs = 61;
  const std::string base = dir() + "/long";
  RunReport whole;
  {
    Session session(Options().report_dir(dir()).run_name("long").print_report(false));
    for (int i = 0; i + 1 < kEpochs; ++i) one_step_epoch(session);
    session.flush_report();  // every line on disk: the next epoch's end lets the early ones go
    one_step_epoch(session);
    const RunReport& r = session.report();
    ASSERT_EQ(r.epochs.size(), 16u);
    EXPECT_EQ(r.epochs.front().index, kEpochs - 16);
    EXPECT_EQ(r.epochs.back().index, kEpochs - 1);
    session.flush_report();
    whole = read_report_file(base + ".json");  // the journal: every epoch
    ASSERT_EQ(whole.epochs.size(), static_cast<std::size_t>(kEpochs));
    whole.environment = r.environment;
  }
  EXPECT_FALSE(fs::exists(base + ".jsonl"));
  std::ifstream json(base + ".json"), html(base + ".html");
  const std::string json_text{std::istreambuf_iterator<char>(json), {}};
  const std::string html_text{std::istreambuf_iterator<char>(html), {}};
  EXPECT_TRUE(json_text == format_json_report(whole));
  EXPECT_TRUE(html_text == format_html_report(whole));
  const RunReport back = read_report_file(base + ".json");
  ASSERT_EQ(back.epochs.size(), static_cast<std::size_t>(kEpochs));
  for (int i = 0; i < kEpochs; ++i) EXPECT_EQ(back.epochs[i].index, i);
}

// The queue left an epoch out of the journal (the disk stalled past its 64 lines): the epochs
// stay in memory from there, and the document still has every one.
TEST_F(SessionTest, AnEpochTheJournalMissedKeepsTheRunInMemory) {
  constexpr int kEpochs = 90;
  {
    Session session(Options().report_dir(dir()).run_name("missed").print_report(false).warnings(
        [](std::string_view) {}));
    stall_disk();
    for (int i = 0; i < kEpochs; ++i) one_step_epoch(session);
    open_gate();
    session.flush_report();
    sync_armed = false;
    one_step_epoch(session);
    // Fewer than the run in the journal: nothing left memory past the first line it missed.
    const RunReport& r = session.report();
    EXPECT_LT(read_report_file(dir() + "/missed.jsonl").epochs.size(),
              static_cast<std::size_t>(kEpochs) + 1);
    ASSERT_FALSE(r.epochs.empty());
    EXPECT_LE(r.epochs.front().index, 65);
    EXPECT_EQ(r.epochs.back().index, kEpochs);
    EXPECT_GT(r.epochs.size(), 16u);
  }
  const RunReport back = read_report_file(dir() + "/missed.json");
  ASSERT_EQ(back.epochs.size(), static_cast<std::size_t>(kEpochs) + 1);
  for (int i = 0; i <= kEpochs; ++i) EXPECT_EQ(back.epochs[i].index, i);
}

// Issue 24: rank 0 serialized and synced the whole job report at every epoch's end on the
// training thread. Its writer thread does now, and the file holds every epoch once flushed.
TEST_F(SessionTest, RankZerosJobReportIsWrittenOffTheTrainingThread) {
  constexpr int kEpochs = 3;
  {
    Session session(Options().report_dir(dir()).run_name("job").print_report(false));
    use_store(session, c10::make_intrusive<c10d::HashStore>(), {0, 0, 1});
    stall_disk();
    for (int i = 0; i < kEpochs; ++i) one_step_epoch(session);
    EXPECT_FALSE(synced_on_this_thread())
        << "an epoch's end synced the job report on the training thread";
    open_gate();
    session.flush_report();
    sync_armed = false;
    std::ifstream in(dir() + "/job.job.json");
    const std::string job((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::size_t epochs = 0;
    for (auto at = job.find("\"index\""); at != std::string::npos;
         at = job.find("\"index\"", at + 1))
      ++epochs;
    EXPECT_EQ(epochs, static_cast<std::size_t>(kEpochs)) << job;
  }
  sync_armed = false;
  std::lock_guard<std::mutex> lock(sync_mutex);
  EXPECT_EQ(sync_timeouts, 0) << "an epoch's end waited for the job report's writer";
}

TEST_F(SessionTest, AnEpochEndedByAnExceptionIsOnDiskBeforeTheExceptionLeaves) {
  Session session(Options().report_dir(dir()).run_name("thrown").print_report(false));
  one_step_epoch(session);
  try {
    auto e = session.epoch();
    auto step = e.step(1);
    throw std::runtime_error("injected");
  } catch (const std::runtime_error&) {
    // The program may end here without unwinding further (std::terminate): the epoch is there.
    const RunReport back = read_report_file(session.report_path());
    ASSERT_EQ(back.epochs.size(), 2u);
    EXPECT_TRUE(back.epochs[1].ended_by_exception);
  }
}

// A child process trains one-step epochs until it is killed with SIGKILL at a random moment: the
// report on disk must read whole, read while it is written too, and hold every epoch the child
// said it had flushed.
TEST_F(SessionTest, AReportSurvivesAKillAtAnyMoment) {
  constexpr int kMaxChildEpochs = 3000;
  ASSERT_EQ(fs::make_directories(dir()), "");
  std::mt19937 random(12345);
  for (int round = 0; round < 6; ++round) {
    const std::string name = "killed" + std::to_string(round);
    int flushed[2];
    ASSERT_EQ(::pipe(flushed), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(flushed[0]);
      Session session(Options().report_dir(dir()).run_name(name).print_report(false).warnings(
          [](std::string_view) {}));
      // A few thousand epochs at most (a journal of some MiB), then it waits for its kill: on a
      // loaded machine the parent's reads below slowed as the journal grew while the child kept
      // writing, until the journal passed what fathom reads from one input (256 MiB).
      for (int epoch = 1; epoch <= kMaxChildEpochs; ++epoch) {
        one_step_epoch(session);
        // Every third epoch: waits until the disk has it and says so; the others only queue.
        if (epoch % 3 == 0) {
          session.flush_report();
          if (::write(flushed[1], &epoch, sizeof epoch) != sizeof epoch) ::_exit(3);
        }
      }
      for (;;) ::pause();
    }
    ::close(flushed[1]);
    const int at_least = 3 * std::uniform_int_distribution<int>(1, 8)(random);
    int confirmed = 0;
    while (confirmed < at_least) ASSERT_EQ(::read(flushed[0], &confirmed, sizeof confirmed), 4);
    // A reader meanwhile: every read is a whole report.
    const std::string json = dir() + "/" + name + ".json";
    for (int i = 0; i < 20; ++i) {
      const RunReport live = read_report_file(json);
      EXPECT_GE(live.epochs.size(), static_cast<std::size_t>(confirmed));
    }
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(random)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ::close(flushed[0]);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "round " << round;
    EXPECT_FALSE(fs::exists(json));  // killed: the journal is the report
    const RunReport back = read_report_file(json);
    ASSERT_GE(back.epochs.size(), static_cast<std::size_t>(confirmed)) << "round " << round;
    for (std::size_t i = 0; i < back.epochs.size(); ++i) EXPECT_EQ(back.epochs[i].index, i);
  }
}

}  // namespace
}  // namespace fathom
