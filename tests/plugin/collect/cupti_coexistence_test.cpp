// fathom and another CUPTI client in one process (findings 1 and 4 of issue 12): the Kineto
// look-alike (tests/support/cupti_standin/kineto_lookalike.h) profiling before, during, after
// and inside fathom's collection, a tool that owns CUPTI, and a client fathom does not know.
// The user's trace must keep every GPU event and get nothing of fathom's; fathom must say from
// where to where its GPU data is missing, and collect again when the profiler is done.
#include <malloc.h>

#include "kineto_lookalike.h"
#include "standin_fixture.h"

namespace fathom {
namespace {

using testing::all_notes;
using testing::KinetoLookalike;
using testing::mentions;

class CoexistenceTest : public testing::StandinTest {
 protected:
  void SetUp() override {
    StandinTest::SetUp();
    kineto = std::make_unique<KinetoLookalike>(*cupti);
    // What the LibTorch layer tells the collector about torch.profiler.
    config.known_clients.push_back({"torch.profiler (Kineto)",
                                    [this] { return kineto->active(); },
                                    {"kineto", "pytorch"},
                                    [this] { return kineto->records_gpu(); }});
  }
  void TearDown() override { kineto.reset(); }
  // A profiled step as torch.profiler runs it: its CUSTOM0 id around each op's kernels.
  void profiled_step(CuptiCollector& c, int n) {
    ++step_no;
    c.check_clients();
    push_external_id(ExternalIdKind::Phase, phase_external_id(Phase::Forward));
    for (int i = 0; i < n; ++i) {
      kineto->push_op(1000 + static_cast<std::uint64_t>(i));
      op(c, "profiled_kernel");
      kineto->pop_op();
    }
    pop_external_id(ExternalIdKind::Phase);
    c.flush(false);
  }
  // fathom collecting, then a profile starting that no phase has asked about yet.
  std::unique_ptr<CuptiCollector> profile_starts_unnoticed() {
    auto c = start();
    if (!c->collecting()) return c;
    synced_step(*c, 1);
    if (!kineto->init()) ADD_FAILURE() << "the profiler could not subscribe";
    kineto->prepare();
    kineto->start();
    return c;
  }
  // Kernels of the profile's ops launched once fathom is out (stopped, failed), then the
  // profile's end: its trace must hold every one.
  void profiled_kernels_after_fathom(int n) {
    for (int i = 0; i < n; ++i) {
      kineto->push_op(1000 + static_cast<std::uint64_t>(i));
      cupti->launch_kernel("profiled_kernel", 7, 20'000, false);
      kineto->pop_op();
    }
    cupti->wait_gpu();
    kineto->stop();
    expect_clean_trace(n);
  }
  void expect_clean_trace(int kernels_launched) {
    const KinetoLookalike::Seen& s = kineto->seen();
    EXPECT_EQ(s.kernels, kernels_launched) << "the profiler's trace lost GPU events";
    EXPECT_EQ(s.kernels_linked_to_its_ops, kernels_launched)
        << "fathom's ids took the place of the profiler's";
    EXPECT_EQ(s.foreign_correlation, 0) << "fathom's external ids reached the profiler's records";
    EXPECT_EQ(s.unexpected_kind, 0) << "the profiler got records of kinds only fathom enabled";
    EXPECT_EQ(s.invalid_records, 0) << "fathom forced a flush that cut the profiler's records";
  }
  std::unique_ptr<KinetoLookalike> kineto;
};

// Finding 1: a subscription held for the run makes torch.profiler CPU-only for good.
TEST_F(CoexistenceTest, AProfilerStartedWhileFathomCollectsCanStillSubscribe) {
  auto c = start();
  ASSERT_TRUE(c->collecting()) << all_notes(c->not_measured());
  EXPECT_TRUE(kineto->init()) << "fathom holds CUPTI's only subscription";
  EXPECT_FALSE(kineto->cpu_only());
}

// Finding 1, the other order: Kineto keeps its subscription for the life of the process, so its
// (unnamed) subscription is no reason to give up collecting.
TEST_F(CoexistenceTest, AProfilerThatSubscribedEarlierDoesNotStopFathomCollecting) {
  ASSERT_TRUE(kineto->init());
  auto c = start();
  EXPECT_TRUE(c->collecting()) << all_notes(c->not_measured());
  step(*c, 3);
  cupti->wait_gpu();
  c->flush(true);
  EXPECT_EQ(kernels(), 3u);
}

// Finding 1: a trace taken while fathom collects has all its GPU events and nothing of
// fathom's; fathom stands aside at the next phase, says so, and resumes when the trace is done.
TEST_F(CoexistenceTest, ATraceTakenDuringFathomsRunKeepsEveryGpuEventAndFathomResumes) {
  auto c = start();
  ASSERT_TRUE(c->collecting());
  synced_step(*c, 3);
  ASSERT_TRUE(kineto->init());
  kineto->prepare();
  kineto->start();
  profiled_step(*c, 4);
  EXPECT_EQ(c->state(), CuptiState::StandingAside);
  profiled_step(*c, 4);
  kineto->stop();
  expect_clean_trace(8);
  EXPECT_TRUE(mentions(c->not_measured(), "torch.profiler (Kineto) took CUPTI at step 2"))
      << all_notes(c->not_measured());
  step(*c, 2);  // the profiler is done: fathom collects again
  EXPECT_EQ(c->state(), CuptiState::Collecting) << all_notes(c->not_measured());
  EXPECT_TRUE(mentions(c->not_measured(), "from step 2 to step 4")) << all_notes(c->not_measured());
  step(*c, 3);
  cupti->wait_gpu();
  c->flush(true);
  EXPECT_EQ(kernels_named("ampere_sgemm_128x64_nn"), 3u + 3u)
      << "the first step's kernels and those after the resume; the 2 of the resuming step "
         "were launched before fathom armed again";
  EXPECT_EQ(kernels_named("profiled_kernel"), 0u) << "the profiler's window is not fathom's";
}

// Finding 1: a profile running when the session starts makes fathom wait, not quit.
TEST_F(CoexistenceTest, AProfileRunningAtTheStartMakesFathomWaitItsTurn) {
  ASSERT_TRUE(kineto->init());
  kineto->prepare();
  kineto->start();
  auto c = start();
  EXPECT_EQ(c->state(), CuptiState::StandingAside);
  EXPECT_TRUE(c->live());
  EXPECT_TRUE(mentions(c->not_measured(), "is collecting at the session start"));
  profiled_step(*c, 3);
  kineto->stop();
  expect_clean_trace(3);
  step(*c, 1);
  EXPECT_EQ(c->state(), CuptiState::Collecting);
  step(*c, 2);
  cupti->wait_gpu();
  c->flush(true);
  EXPECT_EQ(kernels_named("ampere_sgemm_128x64_nn"), 2u);
}

// Finding 4: a schedule's warm-up already owns CUPTI (Kineto registers its callbacks and
// enables its kinds then, before torch.profiler records anything).
TEST_F(CoexistenceTest, AScheduledWarmUpIsAlreadyATakeover) {
  auto c = start();
  step(*c, 2);  // still running when the warm-up registers: the takeover's flush sorts it out
  ASSERT_TRUE(kineto->init());
  kineto->prepare();   // warm-up: no start() yet
  synced_step(*c, 2);  // Kineto keeps warm-up records still in flight at its start: not ours
  EXPECT_EQ(c->state(), CuptiState::StandingAside);
  kineto->start();
  profiled_step(*c, 3);
  kineto->stop();
  expect_clean_trace(3);
}

// Issue 23, 4(d): a profile started and stopped inside one phase is never seen at a phase start;
// the next eligible op sees it. fathom stops pushing its ids there (the phase's one withdrawn
// too), stands aside at the step end (its buffers out of CUPTI) and, the profile being over,
// collects again from the next step instead of losing the rest of the epoch.
TEST_F(CoexistenceTest, AProfileInsideOnePhaseIsNoticedAtTheNextOpAndFathomRecovers) {
  auto c = start();
  synced_step(*c, 2);
  ++step_no;
  c->check_clients();
  push_external_id(ExternalIdKind::Phase, phase_external_id(Phase::Forward));
  ASSERT_TRUE(kineto->init());
  kineto->prepare();
  kineto->start();
  for (int i = 0; i < 3; ++i) {
    kineto->push_op(2000 + static_cast<std::uint64_t>(i));
    op(*c, "profiled_kernel");
    kineto->pop_op();
  }
  kineto->stop();  // its callbacks stay registered, its kinds (kernels among them) are off
  pop_external_id(ExternalIdKind::Phase);
  expect_clean_trace(3);
  c->flush(false);  // the step end
  EXPECT_EQ(c->state(), CuptiState::Collecting) << all_notes(c->not_measured());
  EXPECT_TRUE(mentions(c->not_measured(), "torch.profiler (Kineto) took CUPTI at step 2"))
      << all_notes(c->not_measured());
  EXPECT_TRUE(mentions(c->not_measured(), "fathom resumed CUPTI collection at step 2"))
      << all_notes(c->not_measured());
  step(*c, 3);
  step(*c, 3);
  cupti->wait_gpu();
  c->flush(false);  // no forced flush: the epoch goes on
  EXPECT_EQ(kernels_named("ampere_sgemm_128x64_nn"), 2u + 6u)
      << "the steps after the profile are measured" << all_notes(c->not_measured());
  EXPECT_EQ(kernels_named("profiled_kernel"), 0u) << "the profile's kernels are its own";
}

// A client fathom cannot ask is never robbed: once it has the callbacks, fathom stays aside.
TEST_F(CoexistenceTest, AnUnknownClientKeepsCupti) {
  config.known_clients.clear();
  auto c = start();
  synced_step(*c, 2);
  kineto->prepare();  // fathom does not know this one
  kineto->start();
  for (int i = 0; i < 4; ++i) profiled_step(*c, 2);
  EXPECT_EQ(c->state(), CuptiState::StandingAside);
  cupti->wait_gpu();
  c->flush(true);
  EXPECT_EQ(c->state(), CuptiState::StandingAside) << "re-registering would rob it";
  profiled_step(*c, 2);
  kineto->stop();
  EXPECT_EQ(kineto->seen().kernels, 10);
  EXPECT_EQ(kineto->seen().unexpected_kind, 0);
  // Until fathom noticed (two silent step ends), its ids still went out: on its own kind, which
  // the profiler ignores, never on the profiler's.
  EXPECT_EQ(kineto->seen().kernels_linked_to_its_ops, 10);
}

// A silence that was not a takeover (a step whose traced calls fathom expected but made none)
// ends at the next buffer, with no data lost for the steps after.
TEST_F(CoexistenceTest, ASuspectedTakeoverThatWasNotOneEndsAtTheNextBuffer) {
  auto c = start();
  synced_step(*c, 2);  // every buffer back: what follows is silence
  for (int i = 0; i < 3; ++i) {
    ++step_no;
    c->note_traced_calls(2);  // phase events expected, none made
    c->flush(false);
  }
  EXPECT_EQ(c->state(), CuptiState::StandingAside);
  step(*c, 2);  // buffers come back: fathom's callbacks were never taken
  EXPECT_EQ(c->state(), CuptiState::Collecting) << all_notes(c->not_measured());
  EXPECT_FALSE(mentions(c->not_measured(), "buffers went to"))
      << "no client had CUPTI: no buffer of fathom's was lost to one";
  step(*c, 2);
  cupti->wait_gpu();
  c->flush(true);
  EXPECT_GE(kernels(), 6u);
}

// Issue 23, 4(a): the session ends while a profile runs that fathom has not noticed yet (no phase
// asked since it started). The profile keeps the kernels launched after fathom's end.
TEST_F(CoexistenceTest, ASessionEndingDuringAProfileLeavesItsKernelsToTheProfile) {
  auto c = profile_starts_unnoticed();
  ASSERT_TRUE(c->collecting());
  c->stop();
  profiled_kernels_after_fathom(3);
}

// The same for a CUPTI failure while a profile runs: fathom gives up, the profile's kinds stay.
TEST_F(CoexistenceTest, AFailureDuringAProfileLeavesItsKindsEnabled) {
  auto c = profile_starts_unnoticed();
  ASSERT_TRUE(c->collecting());
  cupti->set_result("cuptiActivityFlushAll", CUPTI_ERROR_UNKNOWN);
  c->flush(false);
  cupti->set_result("cuptiActivityFlushAll", CUPTI_SUCCESS);
  ASSERT_EQ(c->state(), CuptiState::Failed) << all_notes(c->not_measured());
  profiled_kernels_after_fathom(3);
}

// Issue 23, 4(e): records CUPTI dropped while a profile collects are the profile's to count:
// fathom, standing aside, neither reads (which resets) nor takes them as its own.
TEST_F(CoexistenceTest, DropsDuringAProfileAreLeftToTheProfile) {
  auto c = start();
  ASSERT_TRUE(c->collecting());
  synced_step(*c, 1);
  ASSERT_TRUE(kineto->init());
  kineto->prepare();
  kineto->start();
  profiled_step(*c, 1);
  ASSERT_EQ(c->state(), CuptiState::StandingAside);
  const std::int64_t fathoms = c->dropped_records();
  KinetoLookalike::decline_requests(true);
  cupti->wait_gpu();
  cupti->api.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // the profile's own flush
  profiled_step(*c, 3);  // no buffer for these: CUPTI drops and counts them
  cupti->wait_gpu();
  KinetoLookalike::decline_requests(false);
  EXPECT_EQ(c->dropped_records(), fathoms) << "the profile's drops counted as fathom's";
  std::size_t left = 0;
  ASSERT_EQ(cupti->api.activity_get_num_dropped_records(reinterpret_cast<CUcontext>(1), 7, &left),
            CUPTI_SUCCESS);
  EXPECT_GT(left, 0u) << "fathom read (and reset) the profile's dropped-record count";
  kineto->stop();
}

// Issue 23, 4(b): torch.profiler with activities=[CPU] on a CUDA machine takes CUPTI's callbacks
// and records runtime calls, but no GPU work. fathom stands aside for it and turns off the GPU
// kinds it enabled, which nobody uses now: the profile's trace gets no record it did not ask for,
// and a session ending inside it leaves CUPTI instrumenting nothing once the profile is done.
TEST_F(CoexistenceTest, ACpuOnlyProfileLeavesNothingOfFathomsOnWhenTheSessionEndsInIt) {
  auto c = start();
  ASSERT_TRUE(c->collecting());
  synced_step(*c, 1);
  ASSERT_TRUE(kineto->init());
  kineto->prepare(/*tsc_timestamps=*/true, /*cuda_activities=*/false);
  kineto->start();
  profiled_step(*c, 2);
  EXPECT_EQ(c->state(), CuptiState::StandingAside);
  EXPECT_FALSE(cupti->kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL))
      << "kernels recorded for nobody while a CPU-only profile runs";
  c->stop();  // the session ends inside the profile
  for (int i = 0; i < 2; ++i) {
    kineto->push_op(3000 + static_cast<std::uint64_t>(i));
    cupti->launch_kernel("profiled_kernel", 7, 20'000, false);
    kineto->pop_op();
  }
  cupti->wait_gpu();
  kineto->stop();
  EXPECT_EQ(kineto->seen().unexpected_kind, 0) << "the CPU-only trace got fathom's GPU records";
  EXPECT_GT(kineto->seen().runtime, 0) << "the profile's own runtime calls";
  EXPECT_EQ(cupti->enabled_kind_count(), 0);
  EXPECT_EQ(cupti->enabled_cbid_count(), 0);
  const std::uint64_t before = cupti->stats().gpu_records;
  cupti->launch_kernel("after_everyone", 7, 1'000, false);
  cupti->wait_gpu();
  EXPECT_EQ(cupti->stats().gpu_records, before) << "CUPTI still records every launch, for nobody";
}

// After a CPU-only profile fathom collects again, its GPU kinds back on.
TEST_F(CoexistenceTest, FathomCollectsKernelsAgainAfterACpuOnlyProfile) {
  auto c = start();
  synced_step(*c, 1);
  ASSERT_TRUE(kineto->init());
  kineto->prepare(/*tsc_timestamps=*/true, /*cuda_activities=*/false);
  kineto->start();
  profiled_step(*c, 2);
  kineto->stop();
  step(*c, 1);
  EXPECT_EQ(c->state(), CuptiState::Collecting) << all_notes(c->not_measured());
  step(*c, 2);
  cupti->wait_gpu();
  c->flush(true);
  EXPECT_EQ(kernels_named("ampere_sgemm_128x64_nn"), 1u + 2u) << all_notes(c->not_measured());
}

// Issue 23, 4(c): at each takeover CUPTI hands the buffers fathom gave it to the profiler's
// callback, which logs "unknown buffer" and keeps them. fathom frees those its waited forced flush
// did not bring back, so profiling every few steps (schedule(repeat=0)) holds no more memory after
// 40 profile cycles than after 4 (1 MiB a cycle before).
TEST_F(CoexistenceTest, ManyProfileCyclesDoNotAccumulateFathomsBuffers) {
  auto c = start();
  ASSERT_TRUE(c->collecting());
  ASSERT_TRUE(kineto->init());
  auto held = [] {
    const struct mallinfo2 m = mallinfo2();
    return static_cast<std::int64_t>(m.uordblks + m.hblkhd);
  };
  constexpr int kCycles = 40;
  std::int64_t at_cycle_4 = 0;
  int unknown = 0;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    ++step_no;
    c->check_clients();
    for (int i = 0; i < 2; ++i) op(*c, "ampere_sgemm_128x64_nn", 2'000'000);  // still running
    c->flush(false);
    kineto->prepare();
    kineto->start();
    profiled_step(*c, 1);  // fathom stands aside: its buffers go to the profiler's callback
    kineto->stop();
    unknown += kineto->seen().unknown_buffers;
    step(*c, 1);  // fathom resumes
    ASSERT_EQ(c->state(), CuptiState::Collecting) << all_notes(c->not_measured());
    if (cycle == 3) at_cycle_4 = held();
  }
  RecordProperty("held_growth_bytes", std::to_string(held() - at_cycle_4));
  // The scenario, not the property: a takeover hands the profiler fathom's buffer unless the
  // stand-in's buffer thread delivered it to fathom just before (a loaded machine: 36-39 of 40
  // seen). Half the cycles leak ~20 MiB on code that never frees them, past the bound below.
  EXPECT_GE(unknown, kCycles / 2) << "most takeovers handed the profiler a buffer of fathom's";
  EXPECT_LT(held() - at_cycle_4, std::int64_t{8} << 20)
      << "fathom's buffers that went to the profiler were never freed";
  EXPECT_TRUE(mentions(c->not_measured(), "fathom freed them")) << all_notes(c->not_measured());
}

// Finding 1: when everyone is done, nothing is left recording for nobody.
TEST_F(CoexistenceTest, NothingIsLeftEnabledWhenEveryoneIsDone) {
  auto c = start();
  step(*c, 1);
  ASSERT_TRUE(kineto->init());
  kineto->prepare();
  kineto->start();
  profiled_step(*c, 2);
  kineto->stop();
  step(*c, 1);
  c->stop();
  EXPECT_EQ(cupti->enabled_kind_count(), 0);
  EXPECT_EQ(cupti->enabled_cbid_count(), 0);
}

// Finding 1: a tool that owns CUPTI (Nsight) is named in the report, and left alone.
TEST_F(CoexistenceTest, AToolThatOwnsCuptiIsNamedAndLeftAlone) {
  cupti->set_injected_tool("Nsight Compute 2025.3.1");
  auto c = start();
  EXPECT_EQ(c->state(), CuptiState::Busy);
  EXPECT_TRUE(mentions(c->not_measured(), "Nsight Compute 2025.3.1"))
      << all_notes(c->not_measured());
  EXPECT_EQ(cupti->enabled_kind_count(), 0);
  EXPECT_EQ(cupti->stats().buffers_requested, 0u);
}

}  // namespace
}  // namespace fathom
