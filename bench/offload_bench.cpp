// Activation offloading on a chain whose activations are large: step time with nothing
// offloaded and with every block under fathom::offload, side by side, with what crossed the link
// (GB/s from device events around each copy) and how much of the copy time hid under compute;
// offloaded twice: each unit's tensors back all at once ("offload"), and one ahead of the one in
// use ("offload1", OffloadOptions::fetch_ahead(1), what Auto runs), which holds less at a
// backward and hides less.
//
//   offload_bench [--device cuda|cpu] [--blocks N] [--width W] [--tokens T] [--repeats R]
//
// Columns: "step" is the median forward+backward wall time (device synchronized), "CPU" the
// process CPU time over the same steps; "held" is what the forward leaves allocated on the device
// for backward, "peak" the allocator's peak in the step. For offload: "out"/"back" the copy time
// per step each way, "wait" the time compute stalled on copies not back yet, and
//   hidden = 1 - (step_offload - step_none) / (out + back)
// the share of the transfer time that cost no step time (1: all overlapped). On the CPU
// (--device cpu) the copy path runs (OffloadOptions::cpu_copy) and there is no link: the row shows
// what it costs, not an overlap.
#include <c10/cuda/CUDACachingAllocator.h>
#include <fathom/offload.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

namespace {

struct MlpBlockImpl : torch::nn::Module {
  explicit MlpBlockImpl(std::int64_t width)
      : up(register_module("up", torch::nn::Linear(width, 4 * width))),
        down(register_module("down", torch::nn::Linear(4 * width, width))) {}
  at::Tensor forward(const at::Tensor& x) { return x + down->forward(torch::gelu(up->forward(x))); }
  torch::nn::Linear up, down;
};
TORCH_MODULE(MlpBlock);

constexpr auto kAggregate = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);

struct Row {
  double step_ms = 0, cpu_ms = 0;
  std::int64_t held = 0, peak = 0;
  fathom::OffloadSummary offload;
};

void sync(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

std::int64_t allocated(const torch::Device& d) {
  if (!d.is_cuda()) return 0;
  return c10::cuda::CUDACachingAllocator::getDeviceStats(d.index())
      .allocated_bytes[kAggregate]
      .current;
}

// fetch_ahead: OffloadOptions::fetch_ahead of the offloaded run.
Row run(std::vector<MlpBlock>& blocks, const at::Tensor& x, bool offloaded, int fetch_ahead,
        int repeats, const torch::Device& device) {
  Row r;
  std::vector<double> wall, cpu;
  fathom::OffloadMeter meter;
  for (int i = 0; i <= repeats; ++i) {  // the first step warms up (allocator, cuBLAS, pinned pool)
    const bool timed = i > 0;
    if (timed && offloaded) meter = fathom::OffloadMeter();
    for (auto& b : blocks) b->zero_grad();
    sync(device);
    if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
    const std::int64_t before = allocated(device);
    const auto t = std::chrono::steady_clock::now();
    const std::clock_t c = std::clock();
    at::Tensor h = x;
    // On the CPU every storage takes the copy path (the sizes are small there); on a GPU the
    // default threshold (1 MiB) applies.
    auto options = fathom::OffloadOptions().meter(meter).fetch_ahead(fetch_ahead);
    if (!device.is_cuda()) options.cpu_copy(true).min_bytes(0);
    for (auto& b : blocks) h = offloaded ? fathom::offload(b, h, options) : b->forward(h);
    sync(device);
    const std::int64_t held = allocated(device) - before;
    h.pow(2).mean().backward();
    sync(device);
    if (!timed) continue;
    wall.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
    cpu.push_back(1e3 * static_cast<double>(std::clock() - c) / CLOCKS_PER_SEC);
    r.held = held;
    if (device.is_cuda())
      r.peak = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
                   .allocated_bytes[kAggregate]
                   .peak -
               before;
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  r.step_ms = wall[wall.size() / 2];
  r.cpu_ms = cpu[cpu.size() / 2];
  if (offloaded) r.offload = meter.summary();  // the last step's copies
  return r;
}

double mib(std::int64_t b) { return static_cast<double>(b) / 1048576.0; }

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cuda";
  std::int64_t blocks_n = 8, width = 2048, tokens = 8192;
  int repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--device")
      device_name = argv[i + 1];
    else if (a == "--blocks")
      blocks_n = std::stoll(argv[i + 1]);
    else if (a == "--width")
      width = std::stoll(argv[i + 1]);
    else if (a == "--tokens")
      tokens = std::stoll(argv[i + 1]);
    else if (a == "--repeats")
      repeats = std::max(1, std::stoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "offload_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (device_name == "cuda" && !torch::cuda::is_available()) {
    std::printf("offload_bench: not run: no GPU (--device cpu runs the CPU copy path)\n");
    return 0;
  }
  const torch::Device device(device_name);
  torch::manual_seed(0);
  std::vector<MlpBlock> blocks;
  for (std::int64_t i = 0; i < blocks_n; ++i) {
    blocks.emplace_back(width);
    blocks.back()->to(device);
  }
  const at::Tensor x = torch::randn({tokens, width}, torch::TensorOptions().device(device));
  std::printf(
      "offload_bench: %s, %lld MLP blocks (width %lld, 4x hidden), %lld tokens, fp32, %d timed "
      "steps (median)\n",
      device_name.c_str(), static_cast<long long>(blocks_n), static_cast<long long>(width),
      static_cast<long long>(tokens), repeats);
  const Row none = run(blocks, x, false, -1, repeats, device);
  const Row off = run(blocks, x, true, -1, repeats, device);
  // Each unit's tensors back one ahead of the one in use (OffloadOptions::fetch_ahead(1), what
  // Auto runs for blocks it offloads without recompute): less held at a backward, less hidden.
  const Row window = run(blocks, x, true, 1, repeats, device);
  const fathom::OffloadSummary& s = off.offload;
  std::printf("variant   step ms   CPU ms   held MiB   peak MiB\n");
  for (const Row* r : {&none, &off, &window}) {
    const char* label = r == &none ? "none" : (r == &off ? "offload" : "offload1");
    if (device.is_cuda())
      std::printf("%-8s %8.2f %8.2f %10.1f %10.1f\n", label, r->step_ms, r->cpu_ms, mib(r->held),
                  mib(r->peak));
    else  // no allocator statistics on the CPU
      std::printf("%-8s %8.2f %8.2f %10s %10s\n", label, r->step_ms, r->cpu_ms, "n/a", "n/a");
  }
  std::printf(
      "(offload: a unit's tensors back all at once; offload1: one ahead of the one in use)\n");
  std::printf("offload vs none: step %.2fx", none.step_ms > 0 ? off.step_ms / none.step_ms : 0.0);
  if (none.held > 0)
    std::printf(", held %.2fx", static_cast<double>(off.held) / static_cast<double>(none.held));
  std::printf("\n");
  std::printf(
      "offloaded per step: %.1f MiB in %lld storages (%lld prefetched a unit ahead, %lld late)\n",
      mib(s.offloaded_bytes), static_cast<long long>(s.offloaded_tensors),
      static_cast<long long>(s.prefetched), static_cast<long long>(s.fetched_late));
  if (!s.fallback.empty()) std::printf("fallback: %s\n", s.fallback.c_str());
  if (s.timed_copies > 0) {
    const double transfer = s.to_host_ms + s.to_device_ms;
    const double hidden = transfer > 0 ? 1.0 - (off.step_ms - none.step_ms) / transfer : 0.0;
    std::printf("link: %.1f GB/s (out %.2f ms, back %.2f ms per step); backward waited %.2f ms\n",
                s.link_bytes_per_second() / 1e9, s.to_host_ms, s.to_device_ms, s.backward_wait_ms);
    std::printf(
        "overlap: hidden %.0f%% of the transfer time (1 - extra step time / transfer time)\n",
        100.0 * std::clamp(hidden, 0.0, 1.0));
    const fathom::OffloadSummary& w = window.offload;
    const double w_transfer = w.to_host_ms + w.to_device_ms;
    const double w_hidden =
        w_transfer > 0 ? 1.0 - (window.step_ms - none.step_ms) / w_transfer : 0.0;
    std::printf(
        "overlap, one ahead: hidden %.0f%% of the transfer time; backward waited %.2f ms; peak "
        "%.2fx the all-at-once row's\n",
        100.0 * std::clamp(w_hidden, 0.0, 1.0), w.backward_wait_ms,
        off.peak > 0 ? static_cast<double>(window.peak) / static_cast<double>(off.peak) : 0.0);
  } else {
    std::printf("link: none on the CPU path (copies are memcpy): no overlap to measure\n");
  }
  return 0;
}
