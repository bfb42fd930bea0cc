// Checkpointing on a GPU (label gpu; skips without one): a chain trains with fathom's plan at a
// batch size that runs out of memory without it, and the caching allocator's peak stays inside the
// budget. A ballast tensor leaves the test a few GiB of the card, so it behaves the same on a
// 24 GB card and on a 141 GB one.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>
#include <fathom/checkpoint_planner.h>
#include <fathom/fathom.h>
#include <gtest/gtest.h>

#include "session_fixture.h"

namespace fathom {
namespace {

using test::SessionTest;

constexpr std::int64_t kGiB = 1LL << 30;
constexpr std::int64_t kWidth = 2048;
constexpr int kBlocks = 16;

torch::nn::Sequential gpu_chain() {
  torch::manual_seed(31);
  torch::nn::Sequential seq;
  for (int i = 0; i < kBlocks; ++i) {
    seq->push_back(torch::nn::Linear(kWidth, kWidth));
    seq->push_back(torch::nn::ReLU());
  }
  seq->push_back(torch::nn::Linear(kWidth, 16));
  return seq;
}

std::int64_t allocated_peak(const c10::Device& d) {
  return c10::getDeviceAllocator(d.type())->getDeviceStats(d.index()).allocated_bytes[0].peak;
}

void train_step(torch::nn::Sequential& model, torch::optim::SGD& optimizer, std::int64_t batch,
                const std::vector<CheckpointSegment>& plan, const c10::Device& device) {
  const at::Tensor x = torch::randn({batch, kWidth}, device);
  optimizer.zero_grad(/*set_to_none=*/true);
  fathom::forward(model, x, plan).pow(2).mean().backward();
  optimizer.step();
}

TEST_F(SessionTest, GpuTrainsWithThePlanWhereThePlainRunRunsOutOfMemory) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: this test needs a GPU";
  const c10::Device device(c10::kCUDA, 0);
  auto* allocator = c10::getDeviceAllocator(device.type());
  const auto [free_bytes, total_bytes] = allocator->getMemoryInfo(device.index());
  const std::int64_t room = 9 * kGiB / 2;  // what the test may use: 4.5 GiB
  if (static_cast<std::int64_t>(free_bytes) < room + kGiB)
    GTEST_SKIP() << "less than 5.5 GiB free on the GPU";
  const std::int64_t budget = 4 * kGiB;  // the peak fathom's plan must stay under
  const std::int64_t batch = 32768;      // one activation: 256 MiB; the plain chain keeps 17
  auto model = gpu_chain();
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 1e-4);

  // Ballast: everything but `room` is taken, so the allocator runs out of memory where a card of
  // that size would.
  const at::Tensor ballast = torch::empty({static_cast<std::int64_t>(free_bytes) - room - kGiB / 4},
                                          torch::dtype(torch::kUInt8).device(device));

  bool plain_ran_out = false;
  try {
    train_step(model, optimizer, batch, {}, device);
  } catch (const c10::OutOfMemoryError&) {
    plain_ran_out = true;
  }
  ASSERT_TRUE(plain_ran_out) << "the plain chain fit: the test's sizes no longer make the point";
  optimizer.zero_grad(true);
  allocator->emptyCache();

  // Measure the chain at an eighth of the batch (activations scale with it), plan for the budget.
  Session session(Options().report_dir(dir()).print_report(false).mode(Mode::Observe));
  session.watch(*model);
  {
    auto e = session.epoch();
    auto step = e.step(batch / 8);
    const at::Tensor x = torch::randn({batch / 8, kWidth}, device);
    at::Tensor loss;
    {
      auto f = step.forward();
      loss = fathom::forward(model, x).pow(2).mean();
    }
    {
      auto b = step.backward();
      optimizer.zero_grad(true);
      loss.backward();
    }
  }
  ASSERT_TRUE(session.report().epochs.at(0).modules.has_value());
  std::vector<ChainBlock> chain;
  for (const ModuleMeasurement& m : session.report().epochs[0].modules->modules) {
    ASSERT_TRUE(m.forward_device_ms.has_value()) << m.name;  // device events on a GPU
    ChainBlock b;
    b.own_bytes = m.own_bytes * 8;
    b.input_saved_bytes = m.input_saved_bytes * 8;
    b.output_saved_bytes = m.output_saved_bytes * 8;
    b.input_bytes = m.input_bytes * 8;
    b.output_bytes = m.output_bytes * 8;
    b.aliases_input = m.aliases_input;
    b.forward_ms = *m.forward_device_ms;
    chain.push_back(b);
  }
  std::int64_t weights = 0;
  for (const auto& p : model->parameters())
    weights += 2 * p.numel() * 4;  // parameters and gradients
  // What is not an activation: weights, gradients, and a few activation-sized transients (an
  // output before its ReLU, the gradients flowing in backward).
  const std::int64_t transients = 3 * batch * kWidth * 4;
  const FusedChain fused = fuse_aliasing_blocks(chain);
  const CheckpointPlan plan = plan_checkpoints(fused.blocks, budget - weights - transients);
  ASSERT_TRUE(plan.feasible) << plan.message;
  const auto segments = unfuse_segments(fused, plan.segments);

  allocator->resetPeakStats(device.index());
  for (int s = 0; s < 3; ++s) train_step(model, optimizer, batch, segments, device);
  torch::cuda::synchronize();
  const std::int64_t peak = allocated_peak(device) - static_cast<std::int64_t>(ballast.nbytes());
  EXPECT_LE(peak, budget) << plan.message;
  std::cout << "plan: " << plan.message << "\npeak allocated with the plan: " << peak / double(kGiB)
            << " GiB of " << budget / double(kGiB) << " GiB budget (" << total_bytes / double(kGiB)
            << " GiB card)\n";
}

}  // namespace
}  // namespace fathom
