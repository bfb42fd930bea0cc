// The buffer parser on records laid out with CUPTI's own structs (cupti_activity.h, CUDA 13).
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <gtest/gtest.h>

#include "collect/cupti/activity_parser.h"
#include "collect/cupti/api_selection.h"
#include "fake_cupti.h"

namespace fathom::cupti {
namespace {

using testing::ActivityBufferBuilder;
using testing::FakeCupti;

class ActivityParserTest : public ::testing::Test {
 protected:
  void SetUp() override { FakeCupti::get().reset(); }
  ParsedBuffer parse() {
    ParsedBuffer out;
    parse_buffer(api, b.data(), b.size(), out);
    return out;
  }
  Api api = testing::fake_api();
  ActivityBufferBuilder b;
};

TEST_F(ActivityParserTest, KernelFieldsComeFromKernel10) {
  auto& k = b.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.name = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1";
  k.deviceId = 1;
  k.streamId = 13;
  k.start = 5000;
  k.end = 7500;
  k.correlationId = 42;
  k.gridX = 64, k.gridY = 2, k.gridZ = 1;
  k.blockX = 128, k.blockY = 1, k.blockZ = 1;
  ParsedBuffer p = parse();
  ASSERT_EQ(p.activity.kernels.size(), 1u);
  const KernelRecord& r = p.activity.kernels[0];
  EXPECT_EQ(r.name,
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1");
  EXPECT_EQ(r.device, 1);
  EXPECT_EQ(r.stream, 13);
  // Still CUPTI's time: ClockAlignment moves it once the unit is known.
  EXPECT_EQ(r.start_ns, 5000);
  EXPECT_EQ(r.end_ns, 7500);
  EXPECT_EQ(r.correlation_id, 42u);
  EXPECT_EQ(r.external_id, 0u);  // attributed later, from the correlation table
  EXPECT_FALSE(r.phase.has_value());
  EXPECT_EQ(r.grid_x, 64);
  EXPECT_EQ(r.grid_y, 2);
  EXPECT_EQ(r.block_x, 128);
  EXPECT_EQ(p.records, 1);
  EXPECT_EQ(p.error, CUPTI_SUCCESS);
}

// CUPTI shares a kernel's name string among its records: the aggregator finds the name's row by
// that string's address instead of hashing the name (KernelRecord::name_key).
TEST_F(ActivityParserTest, KernelsSharingCuptisNameStringShareANameKey) {
  static const char gemm[] = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64";
  static const char same_text_elsewhere[] =
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64";
  for (const char* name : {gemm, gemm, same_text_elsewhere}) {
    auto& k = b.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    k.name = name;
    k.start = 5000;
    k.end = 7500;
  }
  ParsedBuffer p = parse();
  ASSERT_EQ(p.activity.kernels.size(), 3u);
  EXPECT_NE(p.activity.kernels[0].name_key, 0u);
  EXPECT_EQ(p.activity.kernels[0].name_key, p.activity.kernels[1].name_key);
  // Another string with the same text: another key (the aggregator checks names, so it is only
  // a second lookup, never a second row).
  EXPECT_NE(p.activity.kernels[0].name_key, p.activity.kernels[2].name_key);
  EXPECT_EQ(p.activity.kernels[2].name, p.activity.kernels[0].name);
}

TEST_F(ActivityParserTest, MemcpyTellsPageableFromPinnedAndAsyncFromSync) {
  auto& pageable = b.add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  pageable.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  pageable.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  pageable.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  pageable.bytes = 12'582'912;
  pageable.start = 1000;
  pageable.end = 2000;
  pageable.streamId = 7;
  pageable.correlationId = 900;  // the driver's id
  pageable.runtimeCorrelationId = 11;
  auto& pinned = b.add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  pinned.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  pinned.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  pinned.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  pinned.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  pinned.bytes = 4096;
  pinned.start = 2100;
  pinned.end = 2200;
  pinned.correlationId = 12;  // issued through the driver only: no runtime id
  auto& d2d = b.add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  d2d.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
  d2d.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  d2d.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
  d2d.start = 2300;
  d2d.end = 2400;
  ParsedBuffer p = parse();
  ASSERT_EQ(p.activity.memcpys.size(), 3u);
  const MemcpyRecord& a = p.activity.memcpys[0];
  EXPECT_EQ(a.kind, MemcpyKind::HostToDevice);
  EXPECT_EQ(a.src, MemoryKind::Pageable);
  EXPECT_EQ(a.dst, MemoryKind::Device);
  EXPECT_EQ(a.bytes, 12'582'912);
  EXPECT_FALSE(a.async);
  EXPECT_EQ(a.stream, 7);
  EXPECT_EQ(a.start_ns, 1000);
  EXPECT_EQ(a.end_ns, 2000);
  EXPECT_EQ(a.correlation_id, 11u)
      << "the runtime call's id: the one fathom's external ids were pushed around";
  const MemcpyRecord& c = p.activity.memcpys[1];
  EXPECT_EQ(c.kind, MemcpyKind::DeviceToHost);
  EXPECT_EQ(c.dst, MemoryKind::Pinned);
  EXPECT_TRUE(c.async);
  EXPECT_EQ(c.bytes, 4096);
  EXPECT_EQ(c.correlation_id, 12u);
  EXPECT_EQ(p.activity.memcpys[2].kind, MemcpyKind::DeviceToDevice);
  EXPECT_EQ(p.activity.memcpys[2].dst, MemoryKind::Managed);
}

TEST_F(ActivityParserTest, PeerCopiesAreMemcpysBetweenDevices) {
  auto& m = b.add<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2);
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 1 << 20;
  m.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  m.start = 10;
  m.end = 20;
  m.correlationId = 5;
  ParsedBuffer p = parse();
  ASSERT_EQ(p.activity.memcpys.size(), 1u);
  EXPECT_EQ(p.activity.memcpys[0].kind, MemcpyKind::PeerToPeer);
  EXPECT_EQ(p.activity.memcpys[0].bytes, 1 << 20);
  EXPECT_TRUE(p.activity.memcpys[0].async);
}

TEST_F(ActivityParserTest, MemsetAndSynchronization) {
  auto& m = b.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  m.bytes = 256;
  m.streamId = 3;
  m.start = 10;
  m.end = 20;
  m.correlationId = 8;
  // The host wait comes from the synchronizing call itself.
  auto& call = b.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  call.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020;
  call.start = 30;
  call.end = 90;
  call.correlationId = 9;
  // CUDA 13's SYNCHRONIZATION records (queries among them) are another client's if they come.
  auto& s = b.add<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
  s.start = 30;
  s.end = 31;
  ParsedBuffer p = parse();
  ASSERT_EQ(p.activity.memsets.size(), 1u);
  EXPECT_EQ(p.activity.memsets[0].bytes, 256);
  EXPECT_EQ(p.activity.memsets[0].stream, 3);
  EXPECT_EQ(p.activity.memsets[0].correlation_id, 8u);
  ASSERT_EQ(p.activity.syncs.size(), 1u);
  EXPECT_EQ(p.activity.syncs[0].kind, SyncKind::Stream);
  EXPECT_EQ(p.activity.syncs[0].end_ns - p.activity.syncs[0].start_ns, 60);
  EXPECT_EQ(p.activity.syncs[0].correlation_id, 9u);
  EXPECT_EQ(p.skipped, 1);
}

TEST_F(ActivityParserTest, RuntimeCallsAreNamedWithoutTheirVersionSuffix) {
  auto& c = b.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  c.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  c.threadId = 1234;
  c.start = 100;
  c.end = 105;
  c.correlationId = 3;
  auto& unknown = b.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  unknown.cbid = 9999;  // a call the library has no name for: not one fathom reads
  ParsedBuffer p = parse();
  ASSERT_EQ(p.activity.runtime_calls.size(), 1u);
  EXPECT_EQ(p.activity.runtime_calls[0].name, "cudaLaunchKernel");
  EXPECT_EQ(p.activity.runtime_calls[0].thread, 1234u);
  EXPECT_EQ(p.activity.runtime_calls[0].correlation_id, 3u);
  EXPECT_EQ(p.activity.runtime_calls[0].end_ns - p.activity.runtime_calls[0].start_ns, 5);
  EXPECT_EQ(p.skipped, 1);
}

TEST_F(ActivityParserTest, DriverCallsKeepOnlyLaunchesNotMadeInsideARuntimeCall) {
  // cudaLaunchKernel (id 3) calls cuLaunchKernel inside it with the same id: one launch.
  auto& rt = b.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  rt.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  rt.correlationId = 3;
  auto& nested = b.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  nested.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  nested.correlationId = 3;
  // A Triton-style launch straight through the driver (id 4) counts.
  auto& direct = b.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  direct.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  direct.correlationId = 4;
  // Driver housekeeping is not a launch.
  auto& other = b.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  other.cbid = CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent;
  other.correlationId = 5;
  ParsedBuffer p = parse();
  ASSERT_EQ(p.activity.runtime_calls.size(), 2u);
  EXPECT_EQ(p.activity.runtime_calls[0].name, "cudaLaunchKernel");
  EXPECT_EQ(p.activity.runtime_calls[1].name, "cuLaunchKernel");
  EXPECT_EQ(p.activity.runtime_calls[1].correlation_id, 4u);
}

TEST_F(ActivityParserTest, EveryDriverCallThatIsRecordedIsKept) {
  // A CUDA graph launched straight through the driver: recorded because fathom enables it
  // (api_selection.h), so the parser must not drop it.
  auto& graph = b.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  graph.cbid = CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch;
  graph.correlationId = 6;
  ParsedBuffer p = parse();
  ASSERT_EQ(p.activity.runtime_calls.size(), 1u);
  EXPECT_EQ(p.activity.runtime_calls[0].name, "cuGraphLaunch");
  EXPECT_TRUE(traced_driver_api("cuGraphLaunch"));
}

TEST_F(ActivityParserTest, ExternalCorrelationsComeBackBesideTheActivity) {
  auto& op = b.add<CUpti_ActivityExternalCorrelation>(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  op.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  op.externalId = 777;
  op.correlationId = 21;
  auto& phase = b.add<CUpti_ActivityExternalCorrelation>(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  phase.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;
  phase.externalId = 3;
  phase.correlationId = 21;
  ParsedBuffer p = parse();
  ASSERT_EQ(p.correlations.size(), 2u);
  EXPECT_EQ(p.correlations[0].correlation_id, 21u);
  EXPECT_EQ(p.correlations[0].kind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  EXPECT_EQ(p.correlations[0].external_id, 777u);
  EXPECT_EQ(p.correlations[1].kind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1);
  EXPECT_EQ(p.correlations[1].external_id, 3u);
}

TEST_F(ActivityParserTest, GpuRecordsWithoutBothEndsAreLostNotAggregated) {
  auto& untimed = b.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  untimed.name = "no_timestamps";  // CUPTI had no device memory for them
  auto& running = b.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  running.name = "still_running";  // a forced flush: start, no end
  running.start = 500;
  auto& done = b.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  done.name = "done";
  done.start = 500;
  done.end = 900;
  ParsedBuffer p = parse();
  ASSERT_EQ(p.activity.kernels.size(), 1u);
  EXPECT_EQ(p.activity.kernels[0].name, "done");
  EXPECT_EQ(p.lost.untimed, 1);
  EXPECT_EQ(p.lost.in_flight, 1);
  EXPECT_EQ(p.error, CUPTI_SUCCESS);
}

TEST_F(ActivityParserTest, AnIncompleteRecordEndsTheBufferWithoutAnError) {
  b.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET).end = 5;
  b.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_INVALID);  // not yet written
  ParsedBuffer p = parse();
  EXPECT_EQ(p.error, CUPTI_SUCCESS) << "CUPTI_ERROR_INVALID_KIND marks an incomplete record";
  EXPECT_EQ(p.lost.incomplete, 1);
  EXPECT_EQ(p.activity.memsets.size(), 1u);
}

TEST_F(ActivityParserTest, KindsFathomDoesNotReadAreSkippedAndCounted) {
  b.add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  auto& m = b.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  m.bytes = 1;
  m.end = 1;
  ParsedBuffer p = parse();
  EXPECT_EQ(p.records, 2);
  EXPECT_EQ(p.skipped, 1);
  EXPECT_EQ(p.activity.memsets.size(), 1u);
}

TEST_F(ActivityParserTest, AnIterationErrorStopsTheBufferAndIsLogged) {
  b.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  FakeCupti::get().next_record_error = CUPTI_ERROR_UNKNOWN;
  ::testing::internal::CaptureStderr();
  ParsedBuffer p = parse();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(p.error, CUPTI_ERROR_UNKNOWN);
  EXPECT_TRUE(p.activity.memsets.empty());
  EXPECT_NE(log.find("cuptiActivityGetNextRecord"), std::string::npos) << log;
  EXPECT_NE(log.find("CUPTI_ERROR_UNKNOWN"), std::string::npos) << log;
}

TEST_F(ActivityParserTest, AnEmptyBufferYieldsNothing) {
  ParsedBuffer p;
  parse_buffer(api, nullptr, 0, p);
  EXPECT_EQ(p.records, 0);
}

TEST(CuptiEnums, MapToFathomTerms) {
  EXPECT_EQ(memcpy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_HTOA), MemcpyKind::HostToDevice);
  EXPECT_EQ(memcpy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_ATOH), MemcpyKind::DeviceToHost);
  EXPECT_EQ(memcpy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_HTOH), MemcpyKind::HostToHost);
  EXPECT_EQ(memcpy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN), MemcpyKind::Unknown);
  EXPECT_EQ(memory_kind(CUPTI_ACTIVITY_MEMORY_KIND_ARRAY), MemoryKind::Device);
  EXPECT_EQ(memory_kind(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC), MemoryKind::Device);
  EXPECT_EQ(memory_kind(CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC), MemoryKind::Managed);
  EXPECT_EQ(memory_kind(200), MemoryKind::Unknown);
  EXPECT_EQ(sync_kind_of_call("cudaEventSynchronize"), SyncKind::Event);
  EXPECT_EQ(sync_kind_of_call("cudaStreamWaitEvent"), SyncKind::StreamWaitEvent);
  EXPECT_EQ(sync_kind_of_call("cudaStreamSynchronize_ptsz"), SyncKind::Stream);
  EXPECT_EQ(sync_kind_of_call("cudaDeviceSynchronize"), SyncKind::Device);
  EXPECT_EQ(sync_kind_of_call("cuCtxSynchronize"), SyncKind::Context);
  EXPECT_FALSE(sync_kind_of_call("cudaEventQuery").has_value());
  EXPECT_EQ(api_display_name("cudaMemcpyAsync_v3020"), "cudaMemcpyAsync");
  EXPECT_EQ(api_display_name("cudaMemcpyAsync_ptsz_v7000"), "cudaMemcpyAsync_ptsz");
  EXPECT_EQ(api_display_name("cuLaunchKernel"), "cuLaunchKernel");
  EXPECT_EQ(api_display_name("cuMemcpyHtoD_v2"), "cuMemcpyHtoD");
  EXPECT_EQ(api_display_name("a_v"), "a_v");
}

}  // namespace
}  // namespace fathom::cupti
