// fathom::offload on a CUDA device: the saved tensors leave the device during the forward (the
// allocator holds less), come back on a side stream in backward, and the gradients are those of
// the plain run bit for bit. Skips without a GPU.
#include <c10/cuda/CUDACachingAllocator.h>
#include <fathom/offload.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

namespace fathom {
namespace {

std::int64_t allocated_now() {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  return stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
      .current;
}

std::vector<at::Tensor> grads_of(const torch::nn::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : p);
  return out;
}

TEST(OffloadGpu, SavedTensorsLeaveTheDeviceAndGradientsMatchBitForBit) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: this test needs a GPU";
  torch::manual_seed(0);
  using namespace torch::nn;
  Sequential seq;
  for (int i = 0; i < 4; ++i) {
    seq->push_back(Linear(1024, 4096));
    seq->push_back(GELU());
    seq->push_back(Linear(4096, 1024));
  }
  seq->to(torch::kCUDA);
  const at::Tensor x = torch::randn({4096, 1024}, torch::kCUDA);

  auto run = [&](const OffloadMeter* meter, std::int64_t* held) {
    for (auto& p : seq->parameters()) p.mutable_grad() = at::Tensor();
    torch::cuda::synchronize();
    const std::int64_t before = allocated_now();
    at::Tensor h = x;
    for (auto& item : *seq)
      h = meter ? offload([&item](const at::Tensor& in) { return item.forward(in); }, h,
                          OffloadOptions().meter(*meter))
                : item.forward(h);
    torch::cuda::synchronize();
    // A block freed while a side stream still had a use of it counts as allocated until the
    // allocator next looks at its events: let it look.
    c10::cuda::CUDACachingAllocator::emptyCache();
    *held = allocated_now() - before;
    h.pow(2).mean().backward();
    torch::cuda::synchronize();
    return grads_of(*seq);
  };
  std::int64_t plain_held = 0, offload_held = 0;
  const auto plain = run(nullptr, &plain_held);
  OffloadMeter meter;
  const auto offloaded = run(&meter, &offload_held);
  ASSERT_EQ(plain.size(), offloaded.size());
  for (std::size_t i = 0; i < plain.size(); ++i)
    EXPECT_TRUE(torch::equal(plain[i], offloaded[i])) << "gradient " << i << " differs";

  const OffloadSummary s = meter.summary();
  EXPECT_TRUE(s.fallback.empty()) << s.fallback;
  EXPECT_GT(s.offloaded_bytes, 0);
  EXPECT_GT(s.prefetched, 0);
  EXPECT_GT(s.timed_copies, 0);
  // What the forward leaves on the device: the output and what was too small to offload.
  EXPECT_LT(offload_held, plain_held / 2)
      << "plain " << plain_held << " B, offloaded " << offload_held << " B";
  RecordProperty("plain_held_bytes", std::to_string(plain_held));
  RecordProperty("offload_held_bytes", std::to_string(offload_held));
  RecordProperty("link_GBps", std::to_string(s.link_bytes_per_second() / 1e9));
  RecordProperty("backward_wait_ms", std::to_string(s.backward_wait_ms));
  std::printf(
      "offload: plain forward held %.1f MiB, offloaded %.1f MiB; %.1f MiB offloaded, "
      "%.2f ms out, %.2f ms back, %.1f GB/s, backward waited %.2f ms\n",
      plain_held / 1048576.0, offload_held / 1048576.0, s.offloaded_bytes / 1048576.0, s.to_host_ms,
      s.to_device_ms, s.link_bytes_per_second() / 1e9, s.backward_wait_ms);
}

TEST(OffloadGpu, InPlaceChangeAfterTheSaveIsAnError) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: this test needs a GPU";
  torch::nn::Linear lin(256, 256);
  lin->to(torch::kCUDA);
  const at::Tensor x = torch::randn({512, 256}, torch::kCUDA);
  at::Tensor y = offload([&](const at::Tensor& in) { return torch::relu(lin(in)); }, x,
                         OffloadOptions().min_bytes(0));
  y.add_(1);
  try {
    y.sum().backward();
    FAIL() << "backward ran on a stale offloaded tensor";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("AddBackward"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fathom
