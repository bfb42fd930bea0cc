// The session's CUPTI wiring on CPU: the extension with a fake CUPTI, real ATen ops (their
// RecordFunction callbacks push the external ids), and torch.profiler taking CUPTI over.
#include "cupti_extension.h"

#include <cupti_runtime_cbid.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fake_cupti.h"

namespace fathom {
namespace {

using detail::CuptiExtension;
using testing::FakeCupti;

// torch.profiler(activities=[CPU]) as Python starts it.
void start_torch_profiler() {
  using namespace torch::profiler::impl;
  const ProfilerConfig config(ProfilerState::KINETO);
  const std::set<ActivityType> activities{ActivityType::CPU};
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
}

class CuptiExtensionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeCupti::get().reset();
    fake().live_clock = true;
  }
  static FakeCupti& fake() { return FakeCupti::get(); }
  std::unique_ptr<CuptiExtension> make(Options o = Options()) {
    return std::make_unique<CuptiExtension>(
        o, DeviceProperties{0, "fake GPU", 9, 0, 1LL << 37}, env, [](CuptiCollector::Sink sink) {
          return CuptiCollector::start(testing::fake_api(), std::move(sink));
        });
  }
  static bool mentions(const std::vector<Unmeasured>& v, const std::string& text) {
    for (const Unmeasured& u : v) {
      if (u.why.find(text) != std::string::npos) return true;
    }
    return false;
  }
  Environment env;
};

// Stands in for the CUDA kernel an op launches: a callback registered after fathom's, so it
// runs inside the op once fathom has pushed the op's id.
struct LaunchInside {
  static std::unique_ptr<at::ObserverContext> start(const at::RecordFunction& fn) {
    if (std::string_view(fn.name()) == "aten::mm") {
      FakeCupti& f = FakeCupti::get();
      const std::uint64_t t = f.now();
      const std::uint32_t id =
          f.api_call(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                     t, t + 2000);
      f.kernel("ampere_sgemm_128x64_nn", id, t + 3000, t + 503000);  // FP32 on CUDA cores, 500 us
    }
    return nullptr;
  }
  explicit LaunchInside() {
    handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&start).scopes({at::RecordScope::FUNCTION}));
  }
  ~LaunchInside() { at::removeCallback(handle); }
  at::CallbackHandle handle;
};

// One epoch of one step whose forward phase runs an mm that "launches" a kernel.
EpochSummary one_epoch_with_an_mm(CuptiExtension& e, Environment& env) {
  e.on_epoch_begin(0);
  e.on_step_begin(0);
  e.on_phase_begin(Phase::Forward);
  {
    LaunchInside launcher;
    torch::mm(torch::ones({30, 16}), torch::ones({16, 8}));
  }
  e.on_phase_end(Phase::Forward, false);
  e.on_step_end(0, false);
  EpochSummary epoch;
  e.on_epoch_measured(epoch, env);
  return epoch;
}

TEST_F(CuptiExtensionTest, AnEpochOfWorkEndsInASummaryWithOpsAndPhases) {
  auto e = make();
  ASSERT_TRUE(e->collecting());
  EXPECT_TRUE(env.not_measured.empty());
  e->on_epoch_begin(0);
  e->on_step_begin(0);
  e->on_phase_begin(Phase::Forward);
  EXPECT_EQ(fake().stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1], std::vector<std::uint64_t>{3u});
  {
    LaunchInside launcher;
    torch::Tensor a = torch::ones({30, 16}), b = torch::ones({16, 8});
    torch::Tensor c = torch::mm(a, b);
    EXPECT_EQ(c.sum().item<float>(), 30 * 8 * 16);
  }
  EXPECT_TRUE(fake().stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0].empty())
      << "the op popped its id";
  e->on_phase_end(Phase::Forward, false);
  EXPECT_TRUE(fake().stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1].empty());
  e->on_step_end(0, false);
  EpochSummary epoch;
  e->on_epoch_measured(epoch, env);
  ASSERT_TRUE(e->last_summary().has_value());
  ASSERT_TRUE(epoch.gpu.has_value()) << "the GPU section lands in the epoch's report";
  EXPECT_EQ(epoch.gpu->source, "cupti");
  const GpuSummary& s = *e->last_summary();
  EXPECT_EQ(s.source, "cupti");
  EXPECT_TRUE(s.gpu_activity);
  EXPECT_EQ(s.dropped_records, 0);
  const TensorCoreResult& tc = s.tensor_cores;
  EXPECT_EQ(tc.kernel_count, 1);
  EXPECT_EQ(tc.kernel_ns, 500'000);
  EXPECT_EQ(tc.tensor_core_ns, 0);
  EXPECT_TRUE(tc.ops_recorded);
  EXPECT_EQ(tc.eligible_instances, 1);
  EXPECT_EQ(tc.eligible_only_cuda_cores, 1);
  ASSERT_FALSE(tc.on_cuda_cores.empty());
  EXPECT_EQ(tc.on_cuda_cores[0].op, "aten::mm");
  bool forward = false;
  for (const PhaseTensorCores& p : tc.phases)
    forward = forward || (p.phase == "forward" && p.kernel_ns == 500'000);
  EXPECT_TRUE(forward) << "the kernel counts for the phase that launched it";
  EXPECT_TRUE(env.not_measured.empty());
}

TEST_F(CuptiExtensionTest, EveryBatchIsRecordedToAnActivityFileThatReplays) {
  const std::string path =
      ::testing::TempDir() + "fathom_activity_" + std::to_string(::getpid()) + ".jsonl.gz";
  {
    auto e = make(Options().record_activity(path).record_shapes(true));
    ASSERT_TRUE(e->collecting());
    one_epoch_with_an_mm(*e, env);
  }                                           // the end line is written when the extension goes
  const GpuActivity a = load_activity(path);  // throws on a truncated file
  std::remove(path.c_str());
  ASSERT_EQ(a.devices.size(), 1u);
  EXPECT_EQ(a.devices[0].name, "fake GPU");
  ASSERT_EQ(a.kernels.size(), 1u);
  EXPECT_EQ(a.kernels[0].name, "ampere_sgemm_128x64_nn");
  EXPECT_EQ(a.runtime_calls.size(), 1u);
  bool mm = false;
  for (const OpRecord& op : a.ops) mm = mm || op.name == "aten::mm";
  EXPECT_TRUE(mm) << "the eligible op, with its shapes, for the Tensor Core analysis";
  bool forward = false, step = false;
  for (const AnnotationRecord& r : a.annotations) {
    forward = forward || r.name == "forward";
    step = step || r.name == "step 0";
  }
  EXPECT_TRUE(forward && step) << "the phase and step annotations travel with the records";
  EXPECT_TRUE(env.not_measured.empty());
}

TEST_F(CuptiExtensionTest, AnActivityFileThatCannotBeWrittenIsReportedAndCollectionGoesOn) {
  auto e = make(Options().record_activity("/nonexistent-fathom-dir/run.jsonl"));
  EXPECT_TRUE(e->collecting());
  EXPECT_TRUE(mentions(env.not_measured, "/nonexistent-fathom-dir/run.jsonl"));
  e->on_epoch_begin(0);
  e->on_step_begin(0);
  e->on_step_end(0, false);
  EpochSummary epoch;
  e->on_epoch_measured(epoch, env);
  EXPECT_TRUE(epoch.gpu.has_value());
  EXPECT_EQ(env.not_measured.size(), 1u) << "said once";
}

TEST_F(CuptiExtensionTest, ShapesAreRecordedWhenAsked) {
  auto e = make(Options().record_shapes(true));
  one_epoch_with_an_mm(*e, env);
  const TensorCoreResult& tc = e->last_summary()->tensor_cores;
  ASSERT_FALSE(tc.on_cuda_cores.empty());
  EXPECT_EQ(tc.on_cuda_cores[0].shapes, "[30,16] [16,8]");
  EXPECT_EQ(tc.on_cuda_cores[0].dtypes, "float float");
}

TEST_F(CuptiExtensionTest, AFailureMidRunIsReportedWithWhenItHappened) {
  auto e = make();
  e->on_epoch_begin(0);
  e->on_step_begin(0);
  e->on_step_end(0, false);
  e->on_step_begin(1);
  fake().flush_result = CUPTI_ERROR_UNKNOWN;
  ::testing::internal::CaptureStderr();
  e->on_step_end(1, false);
  ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(e->collecting());
  EpochSummary epoch;
  e->on_epoch_measured(epoch, env);
  ASSERT_EQ(env.not_measured.size(), 1u);
  EXPECT_EQ(env.not_measured[0].what, kCuptiMeasurements);
  EXPECT_NE(env.not_measured[0].why.find("CUPTI failed during the run"), std::string::npos);
  EXPECT_NE(env.not_measured[0].why.find("(from epoch 0, step 1)"), std::string::npos)
      << env.not_measured[0].why;
  // The next epoch goes on without CUPTI and adds nothing twice.
  e->on_epoch_begin(1);
  e->on_step_begin(0);
  e->on_step_end(0, false);
  e->on_epoch_measured(epoch, env);
  EXPECT_EQ(env.not_measured.size(), 1u);
}

TEST_F(CuptiExtensionTest, AnotherSubscriberIsReportedAtStart) {
  fake().subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  ::testing::internal::CaptureStderr();
  auto e = make();
  ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(e->collecting());
  ASSERT_EQ(env.not_measured.size(), 1u);
  EXPECT_NE(env.not_measured[0].why.find("another CUPTI client holds CUPTI"), std::string::npos);
  EXPECT_EQ(env.not_measured[0].why.find("from epoch"), std::string::npos)
      << "known before any epoch";
  // Ops run without fathom's callback pushing anything.
  torch::mm(torch::ones({2, 2}), torch::ones({2, 2}));
  EXPECT_EQ(fake().push_calls, 0);
}

TEST_F(CuptiExtensionTest, TorchProfilerStartingMidRunTakesCuptiOver) {
  using namespace torch::autograd::profiler;
  auto e = make();
  e->on_epoch_begin(0);
  e->on_step_begin(0);
  e->on_step_end(0, false);
  ASSERT_FALSE(detail::kineto_profiling());
  e->on_step_begin(1);
  start_torch_profiler();
  EXPECT_TRUE(detail::kineto_profiling());
  e->on_step_end(1, false);
  EXPECT_FALSE(e->collecting());
  EXPECT_TRUE(fake().disabled.empty()) << "the profiler's activity kinds are left alone";
  disableProfiler();
  EpochSummary epoch;
  e->on_epoch_measured(epoch, env);
  EXPECT_TRUE(mentions(env.not_measured,
                       "torch.profiler (Kineto) started profiling during epoch 0, step 1"));
}

TEST_F(CuptiExtensionTest, TorchProfilerRunningAtStartMeansNoCollection) {
  using namespace torch::autograd::profiler;
  start_torch_profiler();
  auto e = make();
  disableProfiler();
  EXPECT_FALSE(e->collecting());
  EXPECT_EQ(fake().subscribe_calls, 0);
  EXPECT_TRUE(mentions(env.not_measured, "torch.profiler (Kineto) is profiling"));
}

TEST(CuptiExtensionFactory, NothingToCollectWithoutACudaDeviceAndOffSaysSo) {
  Environment env;
  EXPECT_EQ(detail::make_cupti_extension(Options(), std::nullopt, env), nullptr);
  EXPECT_EQ(detail::make_cupti_extension(Options(), c10::Device(c10::kCPU), env), nullptr);
  EXPECT_TRUE(env.not_measured.empty()) << "device_info already says there is no CUDA device";
  EXPECT_EQ(detail::make_cupti_extension(Options().cupti(false), c10::Device(c10::kCUDA, 0), env),
            nullptr);
  ASSERT_EQ(env.not_measured.size(), 1u);
  EXPECT_EQ(env.not_measured[0].what, kCuptiMeasurements);
  EXPECT_NE(env.not_measured[0].why.find("FATHOM_CUPTI=off"), std::string::npos);
}

}  // namespace
}  // namespace fathom
