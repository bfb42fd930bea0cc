#include <fathom/error.h>
#include <fathom/gpu_summary.h>
#include <fathom/replay.h>
#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include <string>

#include "aggregate/gpu_aggregator.h"
#include "analyze/summarize_gpu.h"
#include "base/file_system.h"

namespace fathom {
namespace {

// The 2021 format (PyTorch 1.8/1.9 with the TensorBoard plugin): capitalised categories,
// "external id" on GPU events, string tids, ProfilerStep#N and the DataLoader as Operators.
const char* kTrace2021 = R"TRACE({
  "schemaVersion": 1,
  "deviceProperties": [
    {"id": 0, "name": "Tesla V100-DGXS-32GB", "totalGlobalMem": 34084028416, "computeMajor": 7, "computeMinor": 0},
    {"id": 1, "name": "Tesla V100-DGXS-32GB", "totalGlobalMem": 34087305216, "computeMajor": 7, "computeMinor": 0}
  ],
  "traceEvents": [
  {"ph": "X", "cat": "Operator", "name": "ProfilerStep#5", "pid": 1, "tid": "1", "ts": 1000, "dur": 1000, "args": {"External id": 1}},
  {"ph": "X", "cat": "Operator", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "pid": 1, "tid": "1", "ts": 1000, "dur": 300, "args": {"External id": 2}},
  {"ph": "X", "cat": "Operator", "name": "aten::cudnn_convolution", "pid": 1, "tid": "1", "ts": 1400, "dur": 50,
   "args": {"External id": 544, "Input Dims": [[32, 3, 224, 224], [64, 3, 7, 7], [], [[1, 2], [3]]], "Input type": ["float", "float", "", "TensorList"]}},
  {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": "1", "ts": 1410, "dur": 5, "args": {"cbid": 211, "correlation": 34442, "external id": 544}},
  {"ph": "X", "cat": "Kernel", "name": "volta_scudnn_128x64_relu_medium_nn_v1", "pid": 0, "tid": "stream 7", "ts": 1420, "dur": 600,
   "args": {"device": 0, "stream": 7, "correlation": 34442, "external id": 544, "grid": [3136, 1, 1], "block": [128, 1, 1]}},
  {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": "1", "ts": 1310, "dur": 20, "args": {"correlation": 34417, "external id": 537}},
  {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7", "ts": 1320, "dur": 80,
   "args": {"device": 0, "stream": 7, "correlation": 34417, "external id": 537, "bytes": 19267584}},
  {"ph": "X", "cat": "Runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": "1", "ts": 1331, "dur": 70, "args": {"correlation": 34418}},
  {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 7", "ts": 1405, "dur": 1, "args": {"device": 0, "stream": 7, "correlation": 38304, "bytes": 128000}},
  {"ph": "X", "cat": "Operator", "name": "CudnnConvolutionBackward", "pid": 1, "tid": "2", "ts": 1600, "dur": 100, "args": {"External id": 9}},
  {"ph": "s", "id": 34442, "pid": 1, "tid": 1, "ts": 1410, "cat": "async", "name": "launch"},
  {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1000, "args": {"Bytes": 4}},
  {"ph": "X", "cat": "Trace", "ts": 1000, "dur": 2000, "pid": "Traces", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)"}
  ]
})TRACE";

// The current format: lower-case categories, cuda_sync, user_annotation, fractional timestamps.
const char* kTraceNow = R"TRACE({
  "schemaVersion": 1,
  "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#551", "pid": 4, "tid": 4, "ts": 100.5, "dur": 900},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4, "tid": 4, "ts": 200, "dur": 10.25,
   "args": {"External id": 77, "Sequence number": 12, "Input Dims": [[30, 64], [64, 128]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4, "tid": 4, "ts": 201, "dur": 3, "args": {"External id": 77, "correlation": 5}},
  {"ph": "X", "cat": "kernel", "name": "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNN", "pid": 0, "tid": 7, "ts": 210, "dur": 40.125,
   "args": {"External id": 77, "device": 0, "stream": 7, "correlation": 5, "grid": [8, 4, 1], "block": [384, 1, 1]}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 20, "ts": 230, "dur": 100,
   "args": {"device": 0, "stream": 20, "correlation": 6}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": 400, "dur": 10,
   "args": {"device": 0, "stream": 7, "correlation": 8, "bytes": 4096}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpy", "pid": 4, "tid": 4, "ts": 399, "dur": 12, "args": {"correlation": 8}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7, "ts": 500, "dur": 2,
   "args": {"device": 0, "stream": 7, "correlation": 9, "bytes": 1}},
  {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 501, "dur": 9,
   "args": {"cuda_sync_kind": "Stream Sync", "stream": 7, "correlation": 10, "device": 0}},
  {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 7, "ts": 502, "dur": 0,
   "args": {"cuda_sync_kind": "Stream Wait Event", "stream": 7, "correlation": 11, "device": 0}},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#551", "pid": 0, "tid": 7, "ts": 210, "dur": 300},
  {"ph": "f", "id": 5, "pid": 0, "tid": 7, "ts": 210, "cat": "ac2g", "name": "ac2g", "bp": "e"}
  ]
})TRACE";

TEST(KinetoTraceReader, Reads2021Format) {
  const GpuActivity a = parse_kineto_trace(kTrace2021, "t2021.json");
  ASSERT_EQ(a.kernels.size(), 1u);
  const KernelRecord& k = a.kernels[0];
  EXPECT_EQ(k.name, "volta_scudnn_128x64_relu_medium_nn_v1");
  EXPECT_EQ(k.start_ns, 1'420'000);
  EXPECT_EQ(k.end_ns, 2'020'000);
  EXPECT_EQ(k.correlation_id, 34442u);
  EXPECT_EQ(k.external_id, 544u);
  EXPECT_EQ(k.stream, 7);
  EXPECT_EQ(k.grid_x, 3136);
  EXPECT_EQ(k.block_x, 128);
  ASSERT_EQ(a.memcpys.size(), 1u);
  EXPECT_EQ(a.memcpys[0].kind, MemcpyKind::HostToDevice);
  EXPECT_EQ(a.memcpys[0].src, MemoryKind::Pageable);
  EXPECT_EQ(a.memcpys[0].dst, MemoryKind::Device);
  EXPECT_EQ(a.memcpys[0].bytes, 19267584);
  EXPECT_TRUE(a.memcpys[0].async);  // issued by cudaMemcpyAsync (correlation 34417)
  ASSERT_EQ(a.memsets.size(), 1u);
  EXPECT_EQ(a.memsets[0].bytes, 128000);
  EXPECT_EQ(a.runtime_calls.size(), 3u);
  EXPECT_EQ(a.runtime_calls[0].external_id, 544u);
  EXPECT_EQ(a.runtime_calls[0].thread, 1u);
  // Only the device the trace used, with its properties.
  ASSERT_EQ(a.devices.size(), 1u);
  EXPECT_EQ(a.devices[0].name, "Tesla V100-DGXS-32GB");
  EXPECT_EQ(a.devices[0].compute_major, 7);
  EXPECT_EQ(a.devices[0].total_memory_bytes, 34084028416);
}

TEST(KinetoTraceReader, OperatorsThatAreScopesBecomeAnnotations) {
  const GpuActivity a = parse_kineto_trace(kTrace2021, "t2021.json");
  ASSERT_EQ(a.annotations.size(), 3u);
  EXPECT_EQ(a.annotations[0].name, "ProfilerStep#5");
  EXPECT_EQ(a.annotations[1].name, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  EXPECT_EQ(a.annotations[2].name, "CudnnConvolutionBackward");
  EXPECT_EQ(a.annotations[2].thread, 2u);
  // The autograd node is an op as well; the step and the loader are not.
  ASSERT_EQ(a.ops.size(), 2u);
  EXPECT_EQ(a.ops[0].name, "aten::cudnn_convolution");
  EXPECT_EQ(a.ops[0].external_id, 544u);
  ASSERT_EQ(a.ops[0].input_shapes.size(), 4u);
  EXPECT_EQ(a.ops[0].input_shapes[0], (std::vector<std::int64_t>{32, 3, 224, 224}));
  EXPECT_TRUE(a.ops[0].input_shapes[3].empty());  // a TensorList has no one shape
  EXPECT_EQ(a.ops[0].input_dtypes[1], "float");
  EXPECT_EQ(a.ops[1].name, "CudnnConvolutionBackward");
}

TEST(KinetoTraceReader, ReadsCurrentFormat) {
  const GpuActivity a = parse_kineto_trace(kTraceNow, "now.json");
  ASSERT_EQ(a.kernels.size(), 2u);
  EXPECT_EQ(a.kernels[0].start_ns, 210'000);
  EXPECT_EQ(a.kernels[0].end_ns, 250'125);  // 40.125 us
  EXPECT_EQ(a.kernels[0].external_id, 77u);
  EXPECT_EQ(a.kernels[0].grid_y, 4);
  ASSERT_EQ(a.memcpys.size(), 2u);
  EXPECT_EQ(a.memcpys[0].src, MemoryKind::Pinned);
  EXPECT_FALSE(a.memcpys[0].async);  // cudaMemcpy
  EXPECT_EQ(a.memcpys[1].kind, MemcpyKind::DeviceToHost);
  EXPECT_EQ(a.memcpys[1].dst, MemoryKind::Pageable);
  EXPECT_FALSE(a.memcpys[1].async);  // no call with its correlation: unknown is not async
  ASSERT_EQ(a.syncs.size(), 2u);
  EXPECT_EQ(a.syncs[0].kind, SyncKind::Stream);
  EXPECT_EQ(a.syncs[1].kind, SyncKind::StreamWaitEvent);
  ASSERT_EQ(a.annotations.size(), 1u);  // the gpu_user_annotation copy is left out
  EXPECT_EQ(a.annotations[0].start_ns, 100'500);
  ASSERT_EQ(a.ops.size(), 1u);
  EXPECT_EQ(a.ops[0].sequence_nr, 12);
  EXPECT_EQ(a.ops[0].end_ns, 210'250);
  EXPECT_TRUE(a.devices.empty());  // no deviceProperties: nothing invented
}

TEST(KinetoTraceReader, RecordsFeedTheAnalyses) {
  const GpuSummary s = summarize_gpu(aggregate(parse_kineto_trace(kTraceNow, "now.json")));
  EXPECT_TRUE(s.gpu_activity);
  EXPECT_DOUBLE_EQ(*s.tensor_cores.share, 1.0);  // nvjet bf16; NCCL is not compute
  EXPECT_EQ(s.tensor_cores.misaligned.at(0).misaligned, "M=30");
  EXPECT_EQ(s.timeline.communication_kernels, 1);
  EXPECT_EQ(s.timeline.steps, 1);
}

TEST(KinetoTraceReader, TopLevelArrayFormat) {
  const GpuActivity a = parse_kineto_trace(
      R"([{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": {"device": 0}}])",
      "a.json");
  EXPECT_EQ(a.kernels.size(), 1u);
}

// The reader's own scanner takes what traces hold and gives the rest (a \u escape, UTF-8, an
// integer past 18 digits, a decimal) to nlohmann's parser: both ways give the same records.
TEST(KinetoTraceReader, WhatTheScannerLeavesToNlohmannReadsTheSame) {
  auto kernel = [](const std::string& name, const std::string& correlation) {
    return parse_kineto_trace(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": )" + name +
                                  R"(, "pid": 0, "tid": 7, "ts": 1.5e0, "dur": 2, "args": )"
                                  R"({"device": 0, "stream": -1, "correlation": )" +
                                  correlation + R"(, "grid": [2, 1.0, 1], "block": [0]}}]})",
                              "k.json")
        .kernels.at(0);
  };
  const KernelRecord plain = kernel(R"("k\t\"A\"\/")", "7");
  EXPECT_EQ(plain.name, "k\t\"A\"/");
  EXPECT_EQ(plain.start_ns, 1500);
  EXPECT_EQ(plain.stream, -1);
  EXPECT_EQ(plain.grid_y, 1);
  EXPECT_EQ(kernel(R"("k\t\"\u0041\"\/")", "7").name, plain.name);  // \u: nlohmann's
  EXPECT_EQ(kernel(R"("é")", "7").name, "é");                       // UTF-8: nlohmann's
  // 18 digits are the scanner's; 20 are nlohmann's (past int64: read as no correlation).
  EXPECT_EQ(kernel(R"("k")", "123456789012345678").correlation_id, 123456789012345678u);
  EXPECT_EQ(kernel(R"("k")", "12345678901234567890").correlation_id, 0u);
}

TEST(KinetoTraceReader, EmptyTraceHasNoGpuActivity) {
  const GpuActivity a = parse_kineto_trace(R"({"traceEvents": []})", "e.json");
  EXPECT_FALSE(summarize_gpu(aggregate(a)).gpu_activity);
}

std::string error_of(const std::string& text, const std::string& name) {
  try {
    (void)parse_kineto_trace(text, name);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(KinetoTraceReader, BadInputIsAClearError) {
  const std::string text(kTraceNow);
  EXPECT_NE(error_of(text.substr(0, text.size() / 2), "cut.json")
                .find("cut.json is not valid JSON at byte"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "fathom.report"})", "report.json")
                .find("report.json is not a PyTorch profiler trace"),
            std::string::npos);
  EXPECT_NE(error_of("[1, 2, 3]", "list.json").find("list.json is not a PyTorch profiler trace"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"traceEvents": 3})", "n.json").find("is not a PyTorch profiler trace"),
            std::string::npos);
  EXPECT_NE(error_of("", "empty.json").find("empty.json is not valid JSON"), std::string::npos);
}

TEST(KinetoTraceReader, MissingFileIsNamed) {
  try {
    (void)read_kineto_trace("/nonexistent/trace.json.gz");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open /nonexistent/trace.json.gz"),
              std::string::npos);
  }
}

// --- the real traces in tests/data/traces ---

class SharedTraces : public ::testing::Test {
 protected:
  static std::string trace(const char* name) {
    return std::string(FATHOM_TEST_TRACES) + "/" + name;
  }
  void SetUp() override {
    // The traces are in the repository: a checkout without them is broken, not a reason to skip.
    if (!fs::exists(trace("README.md")))
      GTEST_FAIL() << "the real traces are missing from " << FATHOM_TEST_TRACES
                   << " (tests/data/traces in the repository)";
  }
  static GpuSummary summary(const char* name) {
    GpuSummaryOptions o;
    o.source = name;
    return summarize_gpu(aggregate(read_kineto_trace(trace(name))), o);
  }
};

TEST_F(SharedTraces, V100ResNetCopiesArePageableAndDataLoadingDiffers) {
  const GpuSummary w0 = summary("tbplugin_v100_resnet50_workers0.json.gz");
  const GpuSummary w4 = summary("tbplugin_v100_resnet50_workers4.json.gz");
  for (const GpuSummary* s : {&w0, &w4}) {
    ASSERT_EQ(s->transfers.directions.size(), 1u);
    const TransferDirection& h2d = s->transfers.directions[0];
    EXPECT_EQ(h2d.direction, MemcpyKind::HostToDevice);
    EXPECT_EQ(h2d.count, 12);
    EXPECT_EQ(h2d.pageable_count, 12);
    EXPECT_EQ(h2d.pinned_count, 0);
    EXPECT_EQ(s->transfers.pageable_async_count, 12);
    EXPECT_EQ(s->timeline.steps, 6);
    EXPECT_DOUBLE_EQ(*s->tensor_cores.share, 0.0);  // FP32 on Volta: every GEMM on CUDA cores
    EXPECT_EQ(s->tensor_cores.eligible_only_cuda_cores, s->tensor_cores.eligible_with_kernels);
    ASSERT_EQ(s->devices.size(), 1u);
    EXPECT_EQ(s->devices[0].compute_major, 7);
  }
  // With 0 loader workers the GPU idles while the host loads data; with 4 it hardly does.
  const auto data_share = [](const GpuSummary& s) {
    return static_cast<double>(s.timeline.devices.at(0).idle.data_wait_ns) / s.timeline.window_ns;
  };
  EXPECT_GT(data_share(w0), 0.25);
  EXPECT_LT(data_share(w4), 0.02);
  EXPECT_LT(*w0.timeline.devices.at(0).busy_share, *w4.timeline.devices.at(0).busy_share);
}

TEST_F(SharedTraces, A100TensorCoreShare) {
  const GpuSummary s = summary("hta_a100_alexnet.json.gz");
  ASSERT_TRUE(s.tensor_cores.share.has_value());
  // The TF32 implicit-GEMM convolutions run on Tensor Cores; sgemm, scudnn, FFT do not.
  EXPECT_GT(*s.tensor_cores.share, 0.10);
  EXPECT_LT(*s.tensor_cores.share, 0.25);
  EXPECT_EQ(s.tensor_cores.families.size() > 0, true);
  bool xmma = false;
  for (const auto& f : s.tensor_cores.families)
    xmma = xmma || (f.family == "xmma" && f.tensor_core);
  EXPECT_TRUE(xmma);
  EXPECT_EQ(s.devices.at(0).compute_major, 8);
}

TEST_F(SharedTraces, SampledRankHasNcclPinnedAndPageable) {
  const GpuSummary s = summary("hta_sampled_rank0.json.gz");
  EXPECT_GT(s.timeline.communication_kernels, 0);
  EXPECT_GT(s.timeline.communication_ns, 0);
  ASSERT_TRUE(s.timeline.devices.at(0).communication_overlap_share.has_value());
  const TransferDirection& h2d = s.transfers.directions.at(0);
  EXPECT_EQ(h2d.direction, MemcpyKind::HostToDevice);
  EXPECT_EQ(h2d.pageable_count, 16);
  EXPECT_EQ(h2d.pinned_count, 8);
  EXPECT_GT(*s.tensor_cores.share, 0.0);  // cutlass 1688 tensorop GEMMs
  EXPECT_EQ(s.timeline.steps, 2);
}

TEST_F(SharedTraces, EventSyncTraceSeesHostSynchronization) {
  const GpuSummary s = summary("hta_a100_event_sync.json.gz");
  EXPECT_GT(s.timeline.sync_records, 0);
  EXPECT_GT(s.timeline.devices.at(0).idle.sync_ns, 0);
}

TEST_F(SharedTraces, CpuOnlyTraceSaysNoGpuActivity) {
  const GpuSummary s = summary("hta_cpu_only.json.gz");
  EXPECT_FALSE(s.gpu_activity);
  ASSERT_FALSE(s.not_measured.empty());
  EXPECT_EQ(s.not_measured[0].what, "GPU activity");
  EXPECT_NE(format_gpu_summary_text(s).find("no GPU activity"), std::string::npos);
  EXPECT_NE(format_gpu_summary_json(s).find("\"tensor_cores\": null"), std::string::npos);
}

}  // namespace
}  // namespace fathom
