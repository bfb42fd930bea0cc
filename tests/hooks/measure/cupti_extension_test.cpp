// The session's CUPTI wiring on CPU: the extension on the CUPTI stand-in, real ATen ops (their
// RecordFunction callbacks push the external ids), and the real torch.profiler taking CUPTI over
// and giving it back.
#include "measure/cupti_extension.h"

#include <cupti_runtime_cbid.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "standin.h"
#include "torch_profiler.h"

namespace fathom {
namespace {

using detail::CuptiExtension;

void start_torch_profiler() { test::start_torch_profiler(/*cuda=*/false); }

standin::Control* g_cupti = nullptr;

class CuptiExtensionTest : public ::testing::Test {
 protected:
  void SetUp() override { g_cupti = cupti = &standin::load(); }
  std::unique_ptr<CuptiExtension> make(Options o = Options(), detail::CuptiDeviceHooks hooks = {}) {
    return std::make_unique<CuptiExtension>(
        o, DeviceProperties{0, "stand-in GPU", 9, 0, 1LL << 37}, env,
        [this](CuptiCollector::Sink sink, CuptiConfig config) {
          config.getenv = [](const char*) -> const char* { return nullptr; };
          return CuptiCollector::start(cupti->api, std::move(sink), std::move(config));
        },
        std::move(hooks));
  }
  static bool mentions(const std::vector<Unmeasured>& v, const std::string& text) {
    for (const Unmeasured& u : v) {
      if (u.why.find(text) != std::string::npos) return true;
    }
    return false;
  }
  static std::string all(const std::vector<Unmeasured>& v) {
    std::string s;
    for (const Unmeasured& u : v) s += u.what + ": " + u.why + "\n";
    return s;
  }
  standin::Control* cupti = nullptr;
  Environment env;
};

// Stands in for the CUDA kernel an op launches: a callback registered after fathom's, so it
// runs inside the op once fathom has pushed the op's id.
struct LaunchInside {
  static std::unique_ptr<at::ObserverContext> start(const at::RecordFunction& fn) {
    if (std::string_view(fn.name()) == "aten::mm")
      g_cupti->launch_kernel("ampere_sgemm_128x64_nn", 7, 500'000, false);  // FP32, 500 us
    return nullptr;
  }
  explicit LaunchInside() {
    handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&start).scopes({at::RecordScope::FUNCTION}));
  }
  ~LaunchInside() { at::removeCallback(handle); }
  at::CallbackHandle handle;
};

void step_with_an_mm(CuptiExtension& e, std::int64_t step) {
  e.on_step_begin(step);
  e.on_phase_begin(Phase::Forward);
  {
    LaunchInside launcher;
    torch::mm(torch::ones({30, 16}), torch::ones({16, 8}));
  }
  e.on_phase_end(Phase::Forward, false);
  g_cupti->wait_gpu();  // the loop waits for its step (loss.item())
  e.on_step_end(step, false);
}

// One epoch of one step whose forward phase runs an mm that "launches" a kernel.
EpochSummary one_epoch_with_an_mm(CuptiExtension& e, Environment& env) {
  e.on_epoch_begin(0);
  step_with_an_mm(e, 0);
  EpochSummary epoch;
  e.on_epoch_measured(epoch, env);
  return epoch;
}

TEST_F(CuptiExtensionTest, AnEpochOfWorkEndsInASummaryWithOpsAndPhases) {
  auto e = make();
  ASSERT_TRUE(e->collecting()) << all(env.not_measured);
  EXPECT_TRUE(env.not_measured.empty()) << all(env.not_measured);
  e->on_epoch_begin(0);
  e->on_step_begin(0);
  e->on_phase_begin(Phase::Forward);
  EXPECT_EQ(cupti->external_depth(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2), 1u);
  {
    LaunchInside launcher;
    torch::Tensor a = torch::ones({30, 16}), b = torch::ones({16, 8});
    torch::Tensor c = torch::mm(a, b);
    EXPECT_EQ(c.sum().item<float>(), 30 * 8 * 16);
  }
  EXPECT_EQ(cupti->external_depth(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2), 1u)
      << "the op popped its id";
  e->on_phase_end(Phase::Forward, false);
  EXPECT_EQ(cupti->external_depth(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2), 0u);
  cupti->wait_gpu();
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
  EXPECT_TRUE(env.not_measured.empty()) << all(env.not_measured);
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
  EXPECT_EQ(a.devices[0].name, "stand-in GPU");
  ASSERT_EQ(a.kernels.size(), 1u);
  EXPECT_EQ(a.kernels[0].name, "ampere_sgemm_128x64_nn");
  EXPECT_EQ(a.kernels[0].end_ns - a.kernels[0].start_ns, 500'000);
  ASSERT_EQ(a.runtime_calls.size(), 1u);
  const OpRecord* mm = nullptr;
  for (const OpRecord& op : a.ops)
    if (op.name == "aten::mm") mm = &op;
  ASSERT_NE(mm, nullptr) << "the eligible op, with its shapes, for the Tensor Core analysis";
  // Finding 7: the op and the launch it made carry the same thread id.
  EXPECT_EQ(mm->thread, a.runtime_calls[0].thread)
      << "RecordFunction's threadId() is a counter of its own, not CUPTI's thread id";
  bool forward = false, step = false;
  for (const AnnotationRecord& r : a.annotations) {
    forward = forward || r.name == "forward";
    step = step || r.name == "step 0";
  }
  EXPECT_TRUE(forward && step) << "the phase and step annotations travel with the records";
  EXPECT_TRUE(env.not_measured.empty()) << all(env.not_measured);
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

// Finding 3: the epoch's forced flush comes after every stream is idle, not just the stream
// the phase events were recorded on, so no record of the epoch comes back incomplete.
TEST_F(CuptiExtensionTest, TheEpochEndWaitsForEveryStreamBeforeItsForcedFlush) {
  int waits = 0;
  detail::CuptiDeviceHooks hooks;
  hooks.synchronize = [&] {
    ++waits;
    cupti->pause_gpu(false);
    cupti->wait_gpu();
  };
  auto e = make(Options(), hooks);
  e->on_epoch_begin(0);
  e->on_step_begin(0);
  e->on_phase_begin(Phase::Forward);
  cupti->pause_gpu(true);  // a side stream still busy at the epoch end
  cupti->launch_kernel("vectorized_elementwise_kernel", 9, 200'000, false);
  e->on_phase_end(Phase::Forward, false);
  e->on_step_end(0, false);
  EpochSummary epoch;
  e->on_epoch_measured(epoch, env);
  EXPECT_EQ(waits, 1);
  EXPECT_EQ(cupti->stats().incomplete_at_forced_flush, 0u);
  ASSERT_TRUE(epoch.gpu.has_value());
  EXPECT_EQ(epoch.gpu->dropped_records, 0);
  EXPECT_EQ(epoch.gpu->tensor_cores.kernel_count, 1);
}

TEST_F(CuptiExtensionTest, AFailureMidRunIsReportedWithWhenItHappened) {
  auto e = make();
  e->on_epoch_begin(0);
  e->on_step_begin(0);
  e->on_step_end(0, false);
  e->on_step_begin(1);
  cupti->set_result("cuptiActivityFlushAll", CUPTI_ERROR_UNKNOWN);
  ::testing::internal::CaptureStderr();
  e->on_step_end(1, false);
  ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(e->collecting());
  EpochSummary epoch;
  e->on_epoch_measured(epoch, env);
  ASSERT_EQ(env.not_measured.size(), 1u) << all(env.not_measured);
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

TEST_F(CuptiExtensionTest, AToolThatOwnsCuptiIsReportedAtStart) {
  cupti->set_injected_tool("Nsight Systems 2025.5.1");
  auto e = make();
  EXPECT_FALSE(e->collecting());
  ASSERT_EQ(env.not_measured.size(), 1u);
  EXPECT_NE(env.not_measured[0].why.find("Nsight Systems 2025.5.1"), std::string::npos);
  EXPECT_EQ(env.not_measured[0].why.find("from epoch"), std::string::npos)
      << "known before any epoch";
  // Ops run without fathom's callback pushing anything.
  torch::mm(torch::ones({2, 2}), torch::ones({2, 2}));
  EXPECT_EQ(cupti->external_depth(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2), 0u);
}

// Finding 1, with the real torch.profiler: it starts mid-run, fathom stands aside at the next
// phase (leaving the profiler's kinds alone), the report says from where, and when the profile
// ends fathom collects again and says to where.
TEST_F(CuptiExtensionTest, TorchProfilerTakesCuptiAndGivesItBack) {
  using namespace torch::autograd::profiler;
  auto e = make();
  e->on_epoch_begin(0);
  step_with_an_mm(*e, 0);
  ASSERT_FALSE(detail::kineto_profiling());
  test::start_torch_profiler(/*cuda=*/true);  // kernels among its kinds: they stay on
  EXPECT_TRUE(detail::kineto_profiling());
  step_with_an_mm(*e, 1);
  EXPECT_FALSE(e->collecting());
  ASSERT_NE(e->collector(), nullptr);
  EXPECT_EQ(e->collector()->state(), CuptiState::StandingAside);
  EXPECT_TRUE(cupti->kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL))
      << "kinds the profiler shares are left alone";
  EXPECT_EQ(cupti->external_depth(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2), 0u);
  disableProfiler();
  EXPECT_FALSE(detail::kineto_profiling());
  step_with_an_mm(*e, 2);
  EXPECT_TRUE(e->collecting()) << "fathom collects again once the profile is done";
  step_with_an_mm(*e, 3);
  EpochSummary epoch;
  e->on_epoch_measured(epoch, env);
  EXPECT_TRUE(mentions(env.not_measured, "torch.profiler (Kineto) took CUPTI at epoch 0, step 1"))
      << all(env.not_measured);
  EXPECT_TRUE(mentions(env.not_measured, "from epoch 0, step 1 to epoch 0, step 2"))
      << all(env.not_measured);
  ASSERT_TRUE(epoch.gpu.has_value());
  EXPECT_GE(epoch.gpu->tensor_cores.kernel_count, 2) << "steps 0 and 3 at least";
}

// Issue 23, 4(b), with the real torch.profiler: Kineto gives its child profilers each trace's
// activity types, so fathom knows a CPU-only profile records no GPU work, and turns the kernels,
// copies and memsets it enabled off while it stands aside for one (on a CUDA machine that
// profile still takes CUPTI's buffer callbacks and records runtime calls).
TEST_F(CuptiExtensionTest, ACpuOnlyTorchProfileTurnsFathomsGpuKindsOffWhileItRuns) {
  using namespace torch::autograd::profiler;
  auto e = make();
  e->on_epoch_begin(0);
  step_with_an_mm(*e, 0);
  start_torch_profiler();  // activities=[CPU]
  EXPECT_FALSE(detail::kineto_profile_records_gpu());
  step_with_an_mm(*e, 1);
  ASSERT_NE(e->collector(), nullptr);
  EXPECT_EQ(e->collector()->state(), CuptiState::StandingAside);
  EXPECT_FALSE(cupti->kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  EXPECT_FALSE(cupti->kind_enabled(CUPTI_ACTIVITY_KIND_MEMCPY));
  EXPECT_FALSE(cupti->kind_enabled(CUPTI_ACTIVITY_KIND_MEMSET));
  disableProfiler();
  step_with_an_mm(*e, 2);
  EXPECT_TRUE(e->collecting()) << all(env.not_measured);
  EXPECT_TRUE(cupti->kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL))
      << "on again once fathom collects";
  test::start_torch_profiler(/*cuda=*/true);
  EXPECT_TRUE(detail::kineto_profile_records_gpu());
  disableProfiler();
}

// Issue 23, 4(d), with the real torch.profiler: a profile started inside a phase is seen at the
// next eligible op, which withdraws fathom's ids (the phase's too) before its own would go out;
// the profile stopped inside the same phase, fathom collects again from the step end.
TEST_F(CuptiExtensionTest, AProfileInsideOnePhaseIsSeenAtTheNextOp) {
  using namespace torch::autograd::profiler;
  auto e = make();
  e->on_epoch_begin(0);
  step_with_an_mm(*e, 0);
  e->on_step_begin(1);
  e->on_phase_begin(Phase::Forward);
  ASSERT_EQ(cupti->external_depth(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2), 1u);
  test::start_torch_profiler(/*cuda=*/true);
  torch::mm(torch::ones({30, 16}), torch::ones({16, 8}));
  EXPECT_EQ(cupti->external_depth(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2), 0u)
      << "fathom's ids are still on CUPTI's stack during the profile";
  disableProfiler();
  e->on_phase_end(Phase::Forward, false);
  e->on_step_end(1, false);
  EXPECT_TRUE(e->collecting()) << all(env.not_measured);
  step_with_an_mm(*e, 2);
  EpochSummary epoch;
  e->on_epoch_measured(epoch, env);
  EXPECT_TRUE(mentions(env.not_measured, "torch.profiler (Kineto) took CUPTI at epoch 0, step 1"))
      << all(env.not_measured);
  EXPECT_TRUE(mentions(env.not_measured, "fathom resumed CUPTI collection at epoch 0, step 1"))
      << all(env.not_measured);
  ASSERT_TRUE(epoch.gpu.has_value());
  EXPECT_GE(epoch.gpu->tensor_cores.kernel_count, 2) << "steps 0 and 2";
}

// Finding 1: a profile running when the session starts makes fathom wait its turn.
TEST_F(CuptiExtensionTest, TorchProfilerRunningAtStartMakesFathomWait) {
  using namespace torch::autograd::profiler;
  start_torch_profiler();
  auto e = make();
  EXPECT_FALSE(e->collecting());
  EXPECT_EQ(cupti->enabled_kind_count(), 0) << "nothing of fathom's while the profiler collects";
  EXPECT_TRUE(
      mentions(env.not_measured, "torch.profiler (Kineto) is collecting at the session start"))
      << all(env.not_measured);
  disableProfiler();
  e->on_epoch_begin(0);
  step_with_an_mm(*e, 0);
  EXPECT_TRUE(e->collecting());
  step_with_an_mm(*e, 1);
  EpochSummary epoch;
  e->on_epoch_measured(epoch, env);
  ASSERT_TRUE(epoch.gpu.has_value());
  EXPECT_EQ(epoch.gpu->tensor_cores.kernel_count, 1) << "step 1's; step 0 ran before the resume";
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
