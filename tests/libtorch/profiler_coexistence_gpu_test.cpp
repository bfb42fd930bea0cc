// torch.profiler in the same process as a fathom session, on a real GPU (label gpu; skips
// without one): a trace taken before, during and after fathom's collection has its GPU events,
// and fathom's report says from where to where it stood aside. What the CPU tests check against
// the CUPTI stand-in (tests/core/cupti_coexistence_test.cpp), checked here against the real
// libcupti and torch 2.11's own Kineto.
#include <fathom/fathom.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <string>

#include "session_fixture.h"
#include "torch_profiler.h"

namespace fathom {
namespace {

using test::SessionTest;

void start_profiler() { test::start_torch_profiler(/*cuda=*/true); }

// Stops the profiler and counts the GPU-side events of its trace (kernels, copies).
int stop_profiler() {
  torch::cuda::synchronize();
  auto result = torch::autograd::profiler::disableProfiler();
  int gpu = 0;
  for (const auto& e : result->events())
    if (e.deviceType() == c10::DeviceType::CUDA) ++gpu;
  return gpu;
}

void work(int n) {
  auto a = torch::randn({512, 512}, torch::kCUDA);
  for (int i = 0; i < n; ++i) a = torch::mm(a, a).tanh();
  torch::cuda::synchronize();
}

bool mentions(const RunReport& r, const std::string& text) {
  for (const Unmeasured& u : r.environment.not_measured)
    if (u.why.find(text) != std::string::npos) return true;
  return false;
}

std::string notes(const RunReport& r) {
  std::string s;
  for (const Unmeasured& u : r.environment.not_measured) s += u.what + ": " + u.why + "\n";
  return s;
}

class ProfilerCoexistence : public SessionTest {};

TEST_F(ProfilerCoexistence, GpuTracesBeforeDuringAndAfterFathomKeepTheirKernels) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  work(2);  // the CUDA context and the cuBLAS handle, outside every measurement

  start_profiler();
  work(5);
  EXPECT_GT(stop_profiler(), 0) << "a trace taken before any fathom session";

  {
    Session session(Options().report_dir(dir()).print_report(false));
    {
      auto e = session.epoch();
      for (int i = 0; i < 10; ++i) {
        if (i == 3) start_profiler();
        {
          auto step = e.step(1);
          auto f = step.forward();
          work(3);
        }
        if (i == 6) EXPECT_GT(stop_profiler(), 0) << "a trace taken while fathom collects";
      }
    }
    const RunReport& r = session.report();
    EXPECT_TRUE(mentions(r, "torch.profiler (Kineto) took CUPTI")) << notes(r);
    EXPECT_TRUE(mentions(r, "fathom resumed CUPTI collection")) << notes(r);
    ASSERT_FALSE(r.epochs.empty());
    ASSERT_TRUE(r.epochs[0].gpu.has_value()) << notes(r);
    EXPECT_GT(r.epochs[0].gpu->tensor_cores.kernel_count, 0)
        << "fathom's own steps before and after the profile were measured";
  }

  start_profiler();
  work(5);
  EXPECT_GT(stop_profiler(), 0) << "a trace taken after the session";
}

TEST_F(ProfilerCoexistence, GpuProfilerFirstThenFathomCollects) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Kineto subscribed at its first profile (the test above, or here) and keeps the subscription
  // for the process: fathom must collect anyway.
  start_profiler();
  work(2);
  EXPECT_GT(stop_profiler(), 0);
  Session session(Options().report_dir(dir()).print_report(false));
  {
    auto e = session.epoch();
    for (int i = 0; i < 3; ++i) {
      auto step = e.step(1);
      auto f = step.forward();
      work(3);
    }
  }
  const RunReport& r = session.report();
  ASSERT_TRUE(r.epochs.at(0).gpu.has_value()) << notes(r);
  EXPECT_GT(r.epochs[0].gpu->tensor_cores.kernel_count, 0) << notes(r);
}

}  // namespace
}  // namespace fathom
