// The collector against a fake CUPTI: starting, backing off, attributing, dropping, failing.
#include <cupti_runtime_cbid.h>
#include <fathom/clock.h>
#include <fathom/cupti_collector.h>
#include <gtest/gtest.h>

#include "fake_cupti.h"

namespace fathom {
namespace {

using testing::FakeCupti;

class CuptiCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeCupti::get().reset();
    config.getenv = [this](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    };
  }
  std::unique_ptr<CuptiCollector> start() {
    return CuptiCollector::start(
        api, [this](GpuActivity&& a) { batches.push_back(std::move(a)); }, config);
  }
  static bool mentions(const std::vector<Unmeasured>& v, const std::string& text) {
    for (const Unmeasured& u : v) {
      if (u.why.find(text) != std::string::npos || u.what.find(text) != std::string::npos)
        return true;
    }
    return false;
  }
  FakeCupti& fake = FakeCupti::get();
  cupti::Api api = testing::fake_api();
  CuptiConfig config;
  std::map<std::string, std::string> env;
  std::vector<GpuActivity> batches;
};

TEST_F(CuptiCollectorTest, StartsBySubscribingAndEnablingEveryKind) {
  auto c = start();
  EXPECT_EQ(c->state(), CuptiState::Collecting);
  EXPECT_TRUE(c->collecting());
  EXPECT_EQ(c->library(), "fake");
  EXPECT_TRUE(fake.subscribed);
  for (CUpti_ActivityKind k :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
        CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
        CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
        CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_MEMCPY2}) {
    EXPECT_TRUE(fake.enabled.count(k)) << "kind " << k;
  }
  EXPECT_TRUE(c->not_measured().empty());
  EXPECT_TRUE(external_ids_enabled());
  c->stop();
  EXPECT_FALSE(external_ids_enabled());
  EXPECT_TRUE(fake.enabled.empty());
  EXPECT_FALSE(fake.subscribed);
  EXPECT_EQ(c->state(), CuptiState::Stopped);
}

TEST_F(CuptiCollectorTest, NoLibraryIsACleanNotMeasuredReason) {
  auto c = CuptiCollector::unavailable(
      "libcupti.so.13 not found (searched the loader path, /usr/local/cuda/lib64)");
  EXPECT_EQ(c->state(), CuptiState::Unavailable);
  auto n = c->not_measured();
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].what, kCuptiMeasurements);
  EXPECT_EQ(n[0].why,
            "CUPTI is not available: libcupti.so.13 not found (searched the loader path, "
            "/usr/local/cuda/lib64)");
  c->flush(true);  // all no-ops
  c->add_op({});
  EXPECT_FALSE(external_ids_enabled());
}

TEST_F(CuptiCollectorTest, AnotherSubscriberMeansBackingOff) {
  fake.subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  ::testing::internal::CaptureStderr();
  auto c = start();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(c->state(), CuptiState::Busy);
  EXPECT_TRUE(fake.enabled.empty()) << "fathom must not touch the activity API it does not own";
  EXPECT_EQ(fake.request, nullptr) << "nor take the other client's buffer callbacks";
  auto n = c->not_measured();
  ASSERT_EQ(n.size(), 1u);
  EXPECT_NE(n[0].why.find("another CUPTI client holds CUPTI"), std::string::npos) << n[0].why;
  EXPECT_NE(n[0].why.find("torch.profiler"), std::string::npos) << n[0].why;
  EXPECT_NE(n[0].why.find("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"), std::string::npos)
      << n[0].why;
  EXPECT_NE(log.find("cuptiSubscribe"), std::string::npos) << log;
  EXPECT_FALSE(external_ids_enabled());
}

TEST_F(CuptiCollectorTest, NsightInjectionIsSeenBeforeTouchingCupti) {
  env["CUDA_INJECTION64_PATH"] =
      "/opt/nvidia/nsight-systems/target-linux-x64/libToolsInjection64.so";
  auto c = start();
  EXPECT_EQ(c->state(), CuptiState::Busy);
  EXPECT_EQ(fake.subscribe_calls, 0);
  ASSERT_EQ(c->not_measured().size(), 1u);
  EXPECT_NE(c->not_measured()[0].why.find("libToolsInjection64.so"), std::string::npos);
  EXPECT_NE(c->not_measured()[0].why.find("Nsight Systems"), std::string::npos);
}

TEST_F(CuptiCollectorTest, KinetoDaemonIsSeenBeforeTouchingCupti) {
  env["KINETO_USE_DAEMON"] = "1";
  auto c = start();
  EXPECT_EQ(c->state(), CuptiState::Busy);
  EXPECT_EQ(fake.subscribe_calls, 0);
  EXPECT_TRUE(mentions(c->not_measured(), "KINETO_USE_DAEMON=1"));
}

TEST_F(CuptiCollectorTest, AnEssentialKindThatWillNotEnableUndoesTheStart) {
  fake.enable_results[CUPTI_ACTIVITY_KIND_RUNTIME] = CUPTI_ERROR_NOT_COMPATIBLE;
  ::testing::internal::CaptureStderr();
  auto c = start();
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(c->state(), CuptiState::Busy);
  EXPECT_TRUE(fake.enabled.empty()) << "the kinds enabled before are disabled again";
  EXPECT_EQ(fake.disabled.size(), 3u);  // CONCURRENT_KERNEL, MEMCPY, MEMSET
  EXPECT_FALSE(fake.subscribed);
  EXPECT_TRUE(
      mentions(c->not_measured(), "cuptiActivityEnable(RUNTIME): CUPTI_ERROR_NOT_COMPATIBLE"));
}

TEST_F(CuptiCollectorTest, AnOptionalKindThatWillNotEnableIsReportedAndCollectionGoesOn) {
  fake.enable_results[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION] = CUPTI_ERROR_NOT_INITIALIZED;
  ::testing::internal::CaptureStderr();
  auto c = start();
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(c->state(), CuptiState::Collecting);
  auto n = c->not_measured();
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].what, "host synchronizations (CUPTI)");
  EXPECT_NE(n[0].why.find("CUPTI_ERROR_NOT_INITIALIZED"), std::string::npos);
}

TEST_F(CuptiCollectorTest, OneCollectorAtATimePerProcess) {
  auto first = start();
  auto second = start();
  EXPECT_EQ(first->state(), CuptiState::Collecting);
  EXPECT_EQ(second->state(), CuptiState::Busy);
  EXPECT_TRUE(mentions(second->not_measured(), "another fathom session"));
  second.reset();
  EXPECT_TRUE(external_ids_enabled()) << "the refused one must not detach the running one";
}

TEST_F(CuptiCollectorTest, GpuWorkIsAttributedToTheOpAndPhaseThatLaunchedIt) {
  auto c = start();
  const std::uint64_t base = fake.timestamp;
  push_external_id(ExternalIdKind::Phase, phase_external_id(Phase::Forward));
  push_external_id(ExternalIdKind::Op, 501);
  const std::uint32_t launch =
      fake.api_call(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                    base + 10, base + 15);
  pop_external_id(ExternalIdKind::Op);
  const std::uint32_t copy =
      fake.api_call(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                    base + 20, base + 21);
  pop_external_id(ExternalIdKind::Phase);
  EXPECT_TRUE(fake.stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0].empty());
  EXPECT_TRUE(fake.stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1].empty());
  c->add_op({.name = "aten::mm", .external_id = 501});
  c->flush(false);  // step end: the API records and the op, no GPU work completed yet
  // The kernel and the copy complete later and come back in the next buffer.
  fake.kernel("ampere_sgemm_128x64_nn", launch, base + 100, base + 400);
  fake.memcpy(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
              CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4096, copy, base + 500, base + 600);
  c->flush(true);
  ASSERT_EQ(batches.size(), 2u);
  ASSERT_EQ(batches[0].runtime_calls.size(), 2u);
  EXPECT_EQ(batches[0].runtime_calls[0].name, "cudaLaunchKernel");
  EXPECT_EQ(batches[0].runtime_calls[0].external_id, 501u);
  EXPECT_EQ(batches[0].runtime_calls[0].phase, Phase::Forward);
  ASSERT_EQ(batches[0].ops.size(), 1u);
  EXPECT_EQ(batches[0].ops[0].name, "aten::mm");
  ASSERT_EQ(batches[1].kernels.size(), 1u);
  EXPECT_EQ(batches[1].kernels[0].external_id, 501u);
  EXPECT_EQ(batches[1].kernels[0].phase, Phase::Forward);
  ASSERT_EQ(batches[1].memcpys.size(), 1u);
  EXPECT_EQ(batches[1].memcpys[0].external_id, 0u) << "launched after the op ended";
  EXPECT_EQ(batches[1].memcpys[0].phase, Phase::Forward);
  EXPECT_EQ(batches[1].memcpys[0].bytes, 4096);
  EXPECT_EQ(fake.forced_flush_calls, 1);
}

TEST_F(CuptiCollectorTest, TimesMoveOntoFathomsClock) {
  const std::int64_t before = now_ns();
  auto c = start();
  const std::int64_t after = now_ns();
  const std::uint32_t id =
      fake.api_call(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                    fake.timestamp, fake.timestamp + 1000);
  fake.kernel("k", id, fake.timestamp + 2000, fake.timestamp + 5000);
  c->flush(true);
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].kernels.size(), 1u);
  const KernelRecord& k = batches[0].kernels[0];
  EXPECT_EQ(k.end_ns - k.start_ns, 3000);
  // CUPTI's "now" at start (fake.timestamp) is fathom's now at start; the flush re-reads the
  // offset, so the bounds stretch to the flush.
  const std::int64_t flushed = now_ns();
  EXPECT_GE(k.start_ns, before + 2000);
  EXPECT_LE(k.start_ns, flushed + 2000);
  EXPECT_GE(batches[0].runtime_calls[0].start_ns, before);
  (void)after;
}

TEST_F(CuptiCollectorTest, DroppedRecordsAreCountedNeverSilent) {
  auto c = start();
  fake.dropped_per_buffer = 17;
  fake.pending.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET).bytes = 64;
  c->flush(false);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].dropped_records, 17);
  EXPECT_EQ(batches[0].memsets.size(), 1u);
  fake.pending.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET).bytes = 64;
  fake.dropped_per_buffer = 3;
  c->flush(false);
  EXPECT_EQ(batches.back().dropped_records, 3);
  EXPECT_EQ(c->dropped_records(), 20);
}

TEST_F(CuptiCollectorTest, WhenBuffersRunOutCuptiDropsAndTheCountArrives) {
  config.max_buffers = 0;  // fathom refuses every buffer
  auto c = start();
  fake.pending.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  c->flush(false);
  EXPECT_EQ(fake.refused_buffers, 1u);
  EXPECT_TRUE(batches.empty());
  // CUPTI reports the loss with the next buffer it can complete.
  c.reset();
  config.max_buffers = 4;
  batches.clear();
  auto d = start();
  fake.pending.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  d->flush(false);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].dropped_records, 1);
}

TEST_F(CuptiCollectorTest, ALoopWithoutStepEndsCannotGrowWithoutBound) {
  config.max_pending_records = 2;
  auto c = start();
  for (int i = 0; i < 3; ++i) {
    fake.pending.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
    fake.deliver_pending();  // CUPTI's own thread completing buffers between flushes
  }
  c->flush(false);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].memsets.size(), 2u);
  EXPECT_EQ(batches[0].dropped_records, 1);
  EXPECT_EQ(c->dropped_records(), 1);
}

TEST_F(CuptiCollectorTest, AFailureMidRunDegradesToPhaseTimingAndSaysSo) {
  auto c = start();
  fake.pending.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  c->flush(false);
  ASSERT_EQ(batches.size(), 1u);
  fake.flush_result = CUPTI_ERROR_UNKNOWN;
  ::testing::internal::CaptureStderr();
  c->flush(false);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(c->state(), CuptiState::Failed);
  EXPECT_NE(log.find("cuptiActivityFlushAll"), std::string::npos) << log;
  EXPECT_TRUE(fake.enabled.empty());
  EXPECT_FALSE(fake.subscribed);
  EXPECT_FALSE(external_ids_enabled());
  auto n = c->not_measured();
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].what, kCuptiMeasurements);
  EXPECT_NE(
      n[0].why.find("CUPTI failed during the run (cuptiActivityFlushAll: CUPTI_ERROR_UNKNOWN)"),
      std::string::npos)
      << n[0].why;
  EXPECT_NE(n[0].why.find("phase timing goes on"), std::string::npos);
  const int flushes = fake.flush_calls;
  c->flush(true);
  push_external_id(ExternalIdKind::Op, 1);
  EXPECT_EQ(fake.flush_calls, flushes) << "a failed collector calls CUPTI no more";
  EXPECT_EQ(fake.push_calls, 0);
}

TEST_F(CuptiCollectorTest, ACorruptBufferIsAFailureToo) {
  auto c = start();
  fake.pending.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  fake.next_record_error = CUPTI_ERROR_INVALID_KIND;
  ::testing::internal::CaptureStderr();
  c->flush(false);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(c->state(), CuptiState::Failed);
  EXPECT_TRUE(mentions(c->not_measured(), "cuptiActivityGetNextRecord: CUPTI_ERROR_INVALID_KIND"));
}

TEST_F(CuptiCollectorTest, YieldingLeavesTheOtherClientsActivityAlone) {
  auto c = start();
  push_external_id(ExternalIdKind::Phase, phase_external_id(Phase::Backward));
  fake.pending.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  fake.deliver_pending();
  c->yield("torch.profiler (Kineto) started at epoch 0, step 3");
  EXPECT_EQ(c->state(), CuptiState::Stopped);
  EXPECT_TRUE(fake.disabled.empty()) << "disabling kinds would stop the other client's collection";
  EXPECT_EQ(fake.flush_calls, 0);
  ASSERT_EQ(batches.size(), 1u) << "what was already complete is still delivered";
  EXPECT_TRUE(mentions(c->not_measured(), "torch.profiler (Kineto) started at epoch 0, step 3"));
  // The phase id pushed before is still popped, so no id of fathom's stays on CUPTI's stack.
  pop_external_id(ExternalIdKind::Phase);
  EXPECT_TRUE(fake.stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1].empty());
  push_external_id(ExternalIdKind::Phase, 1);
  EXPECT_TRUE(fake.stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1].empty());
}

TEST_F(CuptiCollectorTest, StopDeliversTheLastRecords) {
  auto c = start();
  fake.pending.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET).bytes = 8;
  c.reset();  // the destructor stops
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].memsets[0].bytes, 8);
  EXPECT_EQ(fake.forced_flush_calls, 1);
}

TEST_F(CuptiCollectorTest, ASinkThatThrowsDoesNotEscape) {
  auto c = CuptiCollector::start(
      api, [](GpuActivity&&) { throw std::runtime_error("aggregator full"); }, config);
  fake.pending.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  ::testing::internal::CaptureStderr();
  c->flush(false);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("aggregator full"), std::string::npos);
  EXPECT_EQ(c->state(), CuptiState::Collecting);
}

TEST(ExternalIds, WithoutACollectorTheyCostNothingAndDoNothing) {
  FakeCupti::get().reset();
  EXPECT_FALSE(external_ids_enabled());
  push_external_id(ExternalIdKind::Op, 5);
  pop_external_id(ExternalIdKind::Op);
  EXPECT_EQ(FakeCupti::get().push_calls, 0);
  EXPECT_EQ(FakeCupti::get().pop_calls, 0);
}

}  // namespace
}  // namespace fathom
