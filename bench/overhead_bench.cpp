// What leaving fathom on costs: the vision example's training loop (examples/cnn/resnet.h) run
// plain, under fathom at each level, and under PyTorch's own profilers, as ratios measured side by
// side in one run. Repetitions are interleaved (each runs every variant, in a rotated order), the
// ratio to the plain loop is taken within each repetition, and medians are reported, so a noisy
// neighbour hits all variants alike. Both wall time and the process's CPU time are measured: on
// a shared CPU-only machine CPU time is the steadier measure of the work instrumentation adds;
// on a GPU, wall time is the one that counts. Then FLOP counting on and off, the steps it counts
// and the steps after them apart, and the cost of one scope and of one op callback.
//
//   overhead_bench [--steps N] [--reps N] [--batch N] [--device cpu|cuda] [--large] [--micro N]
//                  [--flops-only]
//
// --flops-only: the FLOP counting rows alone (counted steps and the steps after them, on vs off).
//
// NVTX: run as is, no tool is attached (a run outside Nsight Systems): a range costs fathom's own
// work plus NVTX's null check, and fathom registers no op callback at all (nothing would receive
// the ranges), while emit_nvtx still formats every op. Run under bench/nvtx_null_tool
// (NVTX_INJECTION64_PATH=.../libfathom_nvtx_null_tool.so), a tool that drops what it gets, for
// what the ranges cost when somebody listens; under nsys the tool's own cost comes on top.
#include <fathom/fathom.h>
#include <time.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "collect/clock.h"
#include "collect/host_info.h"
#include "collect/nvtx.h"
#include "example_args.h"
#include "measure/flop_counter_extension.h"
#include "records/file_system.h"
#include "resnet.h"

namespace {

namespace prof = torch::profiler::impl;
namespace kineto = torch::autograd::profiler;

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}
double median(const std::vector<double>& v) { return quantile(v, 0.5); }

std::string report_dir() {
  return fathom::fs::temp_directory() + "/fathom-overhead-bench-" + std::to_string(::getpid());
}

fathom::Options fathom_options(fathom::NvtxLevel level, bool shapes, bool cupti) {
  return fathom::Options()
      .nvtx(level)
      .record_shapes(shapes)
      .cupti(cupti)
      .print_report(false)
      .report_dir(report_dir())
      .run_name("overhead");
}

enum class Kind { Plain, Fathom, Kineto, EmitNvtx };

struct Variant {
  std::string name;
  Kind kind = Kind::Plain;
  fathom::Options options;  // Fathom
  bool shapes = false;      // Kineto
  std::string unavailable;  // why it cannot run here; empty when it can
  std::vector<double> step_ms, cpu_ms, finish_ms, ratio, cpu_ratio;
};

std::int64_t cpu_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The vision example's step, with and without fathom's scopes; batches are made once, up front,
// so the step is the model's work and the copies, nothing else.
class Loop {
 public:
  Loop(c10::Device device, int batch, bool large)
      : device_(device),
        model_(large ? examples::make_resnet(64, {2, 2, 2, 2})
                     : examples::make_resnet(16, {1, 1, 1})),
        optimizer_(model_->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9)) {
    model_->to(device);
    const std::int64_t side = large ? 64 : 32;
    for (int i = 0; i < 4; ++i) {
      images_.push_back(torch::randn({batch, 3, side, side}));
      labels_.push_back(torch::randint(10, {batch}, torch::kLong));
    }
  }
  torch::nn::Sequential& model() { return model_; }

  void plain_step(int i) {
    auto x = images_[i % 4].to(device_);
    auto y = labels_[i % 4].to(device_);
    auto loss = torch::nn::functional::cross_entropy(fathom::forward(model_, x), y);
    optimizer_.zero_grad();
    loss.backward();
    optimizer_.step();
  }

  void fathom_step(fathom::EpochScope& e, int i) {
    auto step = e.step(images_[i % 4].size(0));
    auto x = step.to_device(images_[i % 4], device_);
    auto y = step.to_device(labels_[i % 4], device_);
    torch::Tensor loss;
    {
      auto f = step.forward();
      loss = torch::nn::functional::cross_entropy(fathom::forward(model_, x), y);
    }
    {
      auto b = step.backward();
      optimizer_.zero_grad();
      loss.backward();
    }
    {
      auto o = step.optimizer();
      optimizer_.step();
    }
  }

  void sync() const {
    if (device_.is_cuda()) torch::cuda::synchronize();
  }

 private:
  c10::Device device_;
  torch::nn::Sequential model_;
  torch::optim::SGD optimizer_;
  std::vector<torch::Tensor> images_, labels_;
};

std::set<prof::ActivityType> activities(bool cuda) {
  std::set<prof::ActivityType> a{prof::ActivityType::CPU};
  if (cuda) a.insert(prof::ActivityType::CUDA);
  return a;
}

// One repetition: the steps are timed first to last (synchronized); the finish is timed apart:
// fathom's epoch end (summary, advisor, JSON report) or the profiler's disable (its result).
// Setup (session creation and watch, profiler preparation) is not timed.
void run_once(Variant& v, Loop& loop, int steps, bool cuda) {
  std::int64_t t0 = 0, t1 = 0, f1 = 0, c0 = 0, c1 = 0;
  switch (v.kind) {
    case Kind::Plain:
      loop.sync();
      c0 = cpu_now_ns(), t0 = fathom::now_ns();
      for (int i = 0; i < steps; ++i) loop.plain_step(i);
      loop.sync();
      t1 = f1 = fathom::now_ns(), c1 = cpu_now_ns();
      break;
    case Kind::Fathom: {
      fathom::Session session(v.options);
      session.watch(*loop.model());
      loop.sync();
      {
        auto e = session.epoch();
        c0 = cpu_now_ns(), t0 = fathom::now_ns();
        for (int i = 0; i < steps; ++i) loop.fathom_step(e, i);
        loop.sync();
        t1 = fathom::now_ns(), c1 = cpu_now_ns();
      }
      f1 = fathom::now_ns();
      break;
    }
    case Kind::Kineto:
    case Kind::EmitNvtx: {
      const bool nvtx = v.kind == Kind::EmitNvtx;
      // As torch.profiler.profile(activities=[CPU(, CUDA)], record_shapes=...) and
      // torch.autograd.profiler.emit_nvtx() set it up.
      prof::ProfilerConfig config(nvtx ? prof::ProfilerState::NVTX : prof::ProfilerState::KINETO,
                                  v.shapes);
      const auto acts = nvtx ? std::set<prof::ActivityType>{} : activities(cuda);
      if (!nvtx) kineto::prepareProfiler(config, acts);
      loop.sync();
      kineto::enableProfiler(config, acts);
      c0 = cpu_now_ns(), t0 = fathom::now_ns();
      for (int i = 0; i < steps; ++i) loop.plain_step(i);
      loop.sync();
      t1 = fathom::now_ns(), c1 = cpu_now_ns();
      auto result = kineto::disableProfiler();
      f1 = fathom::now_ns();
      break;
    }
  }
  v.step_ms.push_back(static_cast<double>(t1 - t0) / 1e6 / steps);
  v.cpu_ms.push_back(static_cast<double>(c1 - c0) / 1e6 / steps);
  v.finish_ms.push_back(static_cast<double>(f1 - t1) / 1e6);
}

// --- FLOP counting
// --------------------------------------------------------------------------------

// fathom at the phase level with FLOP counting on and off, interleaved: the first
// kFlopProfiledSteps steps of the epoch (counted when on) and the `steps` steps after them (never
// counted: no callback is registered) timed apart, wall and CPU time per step.
struct FlopCounting {
  std::vector<double> profiled_ratio, profiled_cpu_ratio, after_ratio, after_cpu_ratio;
  std::vector<double> on_profiled_ms, off_profiled_ms, on_after_ms, off_after_ms;
  std::vector<double> on_after_cpu_ms, off_after_cpu_ms;
};

FlopCounting flop_counting(Loop& loop, int steps, int reps) {
  constexpr int kProfiled = static_cast<int>(fathom::detail::kFlopProfiledSteps);
  FlopCounting out;
  for (int r = 0; r <= reps; ++r) {
    double ms[2][2] = {}, cpu[2][2] = {};  // [counting][profiled, after]
    for (int j = 0; j < 2; ++j) {
      const bool count = (j + r) % 2 == 0;
      fathom::Session session(
          fathom_options(fathom::NvtxLevel::Phases, false, false).count_flops(count));
      session.watch(*loop.model());
      auto e = session.epoch();
      loop.sync();
      const std::int64_t c0 = cpu_now_ns(), t0 = fathom::now_ns();
      for (int i = 0; i < kProfiled; ++i) loop.fathom_step(e, i);
      loop.sync();
      const std::int64_t c1 = cpu_now_ns(), t1 = fathom::now_ns();
      for (int i = 0; i < steps; ++i) loop.fathom_step(e, kProfiled + i);
      loop.sync();
      const std::int64_t c2 = cpu_now_ns(), t2 = fathom::now_ns();
      ms[count][0] = static_cast<double>(t1 - t0) / 1e6 / kProfiled;
      ms[count][1] = static_cast<double>(t2 - t1) / 1e6 / steps;
      cpu[count][0] = static_cast<double>(c1 - c0) / 1e6 / kProfiled;
      cpu[count][1] = static_cast<double>(c2 - c1) / 1e6 / steps;
    }
    if (r == 0) continue;  // warm-up
    out.profiled_ratio.push_back(ms[1][0] / ms[0][0]);
    out.profiled_cpu_ratio.push_back(cpu[1][0] / cpu[0][0]);
    out.after_ratio.push_back(ms[1][1] / ms[0][1]);
    out.after_cpu_ratio.push_back(cpu[1][1] / cpu[0][1]);
    out.on_profiled_ms.push_back(ms[1][0]);
    out.off_profiled_ms.push_back(ms[0][0]);
    out.on_after_ms.push_back(ms[1][1]);
    out.off_after_ms.push_back(ms[0][1]);
    out.on_after_cpu_ms.push_back(cpu[1][1]);
    out.off_after_cpu_ms.push_back(cpu[0][1]);
    std::fprintf(stderr, "\rFLOP counting repetition %d/%d", r, reps);
  }
  std::fprintf(stderr, "\r\033[K");
  return out;
}

// --- micro-benchmarks ---------------------------------------------------------------------------

template <typename F>
double ns_per_iter(int iters, F&& body) {
  const std::int64_t t0 = fathom::now_ns();
  for (int i = 0; i < iters; ++i) body();
  return static_cast<double>(fathom::now_ns() - t0) / iters;
}

// ATen ops one cheap call dispatches (calibrated with a counting RecordFunction callback).
std::atomic<std::int64_t> g_ops{0};
std::unique_ptr<at::ObserverContext> count_op(const at::RecordFunction&) {
  g_ops.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

// RecordFunction calls of one training step, in the scopes fathom's op ranges observe.
double ops_per_step(Loop& loop) {
  auto handle = at::addGlobalCallback(at::RecordFunctionCallback(&count_op).scopes(
      {at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  g_ops = 0;
  for (int i = 0; i < 2; ++i) loop.plain_step(i);
  loop.sync();
  at::removeCallback(handle);
  return static_cast<double>(g_ops.load()) / 2;
}

std::string load_average() {
  std::string s = "?";
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, f)) s = std::string(buf).substr(0, std::string(buf).find(' '));
    std::fclose(f);
  }
  return s;
}

struct Micro {
  double phase_scope_ns = 0, phase_scope_off_ns = 0, module_scope_ns = 0, op_ns = 0;
  double fathom_op_ns = 0, fathom_op_shapes_ns = 0, kineto_op_ns = 0, emit_nvtx_op_ns = 0;
  double flop_op_ns = 0, flop_mm_ns = 0;  // in a profiled step: an op not counted, one counted
  double ops_per_call = 0;
};

Micro micro(int iters, Loop& loop) {
  Micro m;
  const int reps = 5;
  std::vector<double> phase, phase_off, module, base, fat, fat_shapes, kin, nvtx;
  std::vector<double> flop, mm_base, flop_mm;
  auto a = torch::ones({4}), b = torch::ones({4});
  auto op = [&] { (void)at::mul(a, b); };
  auto ma = torch::ones({2, 2}), mb = torch::ones({2, 2});
  auto mm = [&] { (void)at::mm(ma, mb); };
  {
    auto handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&count_op).scopes({at::RecordScope::FUNCTION}));
    g_ops = 0;
    for (int i = 0; i < 1000; ++i) op();
    m.ops_per_call = static_cast<double>(g_ops.load()) / 1000;
    at::removeCallback(handle);
  }
  auto& block = *loop.model()->ptr(3);  // a BasicBlock
  for (int r = 0; r < reps; ++r) {
    {
      fathom::Session s(fathom_options(fathom::NvtxLevel::Phases, false, false));
      auto e = s.epoch();
      auto step = e.step(1);
      phase.push_back(ns_per_iter(iters, [&] { auto f = step.forward(); }));
    }
    {
      fathom::Session s(
          fathom_options(fathom::NvtxLevel::Phases, false, false).mode(fathom::Mode::Off));
      auto e = s.epoch();
      auto step = e.step(1);
      phase_off.push_back(ns_per_iter(iters, [&] { auto f = step.forward(); }));
    }
    {
      fathom::Session s(fathom_options(fathom::NvtxLevel::Modules, false, false));
      s.watch(*loop.model());
      module.push_back(ns_per_iter(iters, [&] { fathom::ModuleScope range(block); }));
    }
    base.push_back(ns_per_iter(iters, op));
    {
      fathom::Session s(fathom_options(fathom::NvtxLevel::Ops, false, false));
      fat.push_back(ns_per_iter(iters, op));
    }
    {
      fathom::Session s(fathom_options(fathom::NvtxLevel::Ops, true, false));
      fat_shapes.push_back(ns_per_iter(iters, op));
    }
    mm_base.push_back(ns_per_iter(iters, mm));
    {
      // Inside a profiled step the FLOP callback is registered.
      fathom::Session s(fathom_options(fathom::NvtxLevel::Phases, false, false));
      auto e = s.epoch();
      auto step = e.step(1);
      flop.push_back(ns_per_iter(iters, op));
      flop_mm.push_back(ns_per_iter(iters, mm));
    }
    for (bool emit : {false, true}) {
      prof::ProfilerConfig config(emit ? prof::ProfilerState::NVTX : prof::ProfilerState::KINETO);
      const auto acts = emit ? std::set<prof::ActivityType>{} : activities(false);
      try {
        if (!emit) kineto::prepareProfiler(config, acts);
        kineto::enableProfiler(config, acts);
        (emit ? nvtx : kin).push_back(ns_per_iter(iters, op));
        kineto::disableProfiler();
      } catch (const std::exception&) {
      }
    }
  }
  const double per_op = m.ops_per_call > 0 ? m.ops_per_call : 1;
  m.phase_scope_ns = median(phase);
  m.phase_scope_off_ns = median(phase_off);
  m.module_scope_ns = median(module);
  m.op_ns = median(base) / per_op;
  m.fathom_op_ns = (median(fat) - median(base)) / per_op;
  m.fathom_op_shapes_ns = (median(fat_shapes) - median(base)) / per_op;
  m.kineto_op_ns = kin.empty() ? -1 : (median(kin) - median(base)) / per_op;
  m.flop_op_ns = (median(flop) - median(base)) / per_op;
  m.flop_mm_ns = median(flop_mm) - median(mm_base);
  m.emit_nvtx_op_ns = nvtx.empty() ? -1 : (median(nvtx) - median(base)) / per_op;
  return m;
}

std::string cpu_model() {
  if (std::FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
      std::string s(line);
      if (s.rfind("model name", 0) == 0) {
        std::fclose(f);
        auto v = s.substr(s.find(':') + 2);
        if (!v.empty() && v.back() == '\n') v.pop_back();
        return v;
      }
    }
    std::fclose(f);
  }
  return "unknown CPU";
}

}  // namespace

int main(int argc, char** argv) try {
  examples::Args defaults;
  defaults.steps = 10;
  defaults.epochs = 7;  // repetitions; --reps below
  std::vector<char*> rest{argv[0]};
  int micro_iters = 100000;
  bool flops_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--flops-only")
      flops_only = true;
    else if (k == "--reps" && i + 1 < argc)
      defaults.epochs = std::stoi(argv[++i]);
    else if (k == "--micro" && i + 1 < argc)
      micro_iters = std::stoi(argv[++i]);
    else
      rest.push_back(argv[i]);
  }
  const auto args = examples::parse_args(static_cast<int>(rest.size()), rest.data(), defaults);
  const int reps = args.epochs, steps = args.steps;
  const int batch = args.batch ? args.batch : args.large ? 256 : 32;
  const c10::Device device = args.pick_device();
  const bool cuda = device.is_cuda();
  torch::manual_seed(0);
  Loop loop(device, batch, args.large);
  const bool tool = fathom::nvtx::tool_attached();
  std::printf("NVTX tool attached: %s\n",
              tool ? "yes (ranges are delivered; fathom's op callback is registered)"
                   : "no (fathom registers no op callback; set NVTX_INJECTION64_PATH to "
                     "libfathom_nvtx_null_tool.so to cost it with a listener)");

  std::vector<Variant> variants;
  auto add_fathom = [&](std::string name, fathom::NvtxLevel level, bool shapes, bool cupti) {
    Variant v{std::move(name), Kind::Fathom, fathom_options(level, shapes, cupti)};
    if (cupti && !cuda) v.unavailable = "no GPU";
    variants.push_back(std::move(v));
  };
  variants.push_back({"plain loop", Kind::Plain});
  add_fathom("fathom phases", fathom::NvtxLevel::Phases, false, false);
  add_fathom("fathom modules", fathom::NvtxLevel::Modules, false, false);
  add_fathom("fathom ops", fathom::NvtxLevel::Ops, false, false);
  add_fathom("fathom ops+shapes", fathom::NvtxLevel::Ops, true, false);
  add_fathom("fathom ops+CUPTI", fathom::NvtxLevel::Ops, false, true);
  variants.push_back({"torch emit_nvtx", Kind::EmitNvtx});
  variants.push_back({"torch profiler", Kind::Kineto});
  variants.push_back({"torch profiler+shapes", Kind::Kineto, {}, true});

  std::printf(
      "overhead_bench: vision loop (%s, batch %d) on %s, %d steps x %d interleaved repetitions\n",
      args.large ? "ResNet-18, 64x64" : "ResNet-8, 32x32", batch, device.str().c_str(), steps,
      reps);
  std::printf(
      "machine: %s, %ld cores visible, %d intra-op threads; torch %s; load average %s at start\n\n",
      cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN), at::get_num_threads(), TORCH_VERSION,
      load_average().c_str());

  if (flops_only) variants.resize(1);  // the plain loop, for the step time
  // One warm-up repetition (allocator, Kineto's first start), then the measured ones.
  for (int r = 0; r <= reps; ++r) {
    for (std::size_t j = 0; j < variants.size(); ++j) {
      Variant& v = variants[(j + static_cast<std::size_t>(r)) % variants.size()];
      if (!v.unavailable.empty()) continue;
      try {
        run_once(v, loop, steps, cuda);
      } catch (const std::exception& e) {
        v.unavailable = std::string(e.what()).substr(0, 60);
      }
    }
    if (r == 0) {
      for (auto& v : variants) v.step_ms.clear(), v.cpu_ms.clear(), v.finish_ms.clear();
      continue;
    }
    const double plain = variants[0].step_ms.back(), plain_cpu = variants[0].cpu_ms.back();
    for (auto& v : variants) {
      if (!v.unavailable.empty()) continue;
      v.ratio.push_back(v.step_ms.back() / plain);
      v.cpu_ratio.push_back(v.cpu_ms.back() / plain_cpu);
    }
    std::fprintf(stderr, "\rrepetition %d/%d", r, reps);
  }
  std::fprintf(stderr, "\r\033[K");

  std::printf("%-22s %9s %9s %17s %9s %9s %17s %10s\n", "variant", "wall ms", "vs plain",
              "p25..p75", "cpu ms", "vs plain", "p25..p75", "finish ms");
  for (const auto& v : variants) {
    if (!v.unavailable.empty()) {
      std::printf("%-22s %9s   (not run: %s)\n", v.name.c_str(), "-", v.unavailable.c_str());
      continue;
    }
    std::printf("%-22s %9.2f %9.4f   %6.4f..%6.4f %9.2f %9.4f   %6.4f..%6.4f %10.2f\n",
                v.name.c_str(), median(v.step_ms), median(v.ratio), quantile(v.ratio, 0.25),
                quantile(v.ratio, 0.75), median(v.cpu_ms), median(v.cpu_ratio),
                quantile(v.cpu_ratio, 0.25), quantile(v.cpu_ratio, 0.75), median(v.finish_ms));
  }
  std::printf(
      "(step times per step, medians; ratios: medians of the per-repetition ratios; finish: once "
      "per run)\n");

  const FlopCounting flops = flop_counting(loop, steps, reps);
  std::printf(
      "\nFLOP counting (fathom phases, counting on vs off, interleaved): the first %lld steps of "
      "an epoch are counted,\nthe %d after them run with no callback registered\n",
      static_cast<long long>(fathom::detail::kFlopProfiledSteps), steps);
  std::printf("%-22s %9s %9s %9s %17s %9s %17s\n", "steps", "on ms", "off ms", "wall on/off",
              "p25..p75", "cpu on/off", "p25..p75");
  std::printf("%-22s %9.2f %9.2f %9.4f   %6.4f..%6.4f %9.4f   %6.4f..%6.4f\n", "profiled (counted)",
              median(flops.on_profiled_ms), median(flops.off_profiled_ms),
              median(flops.profiled_ratio), quantile(flops.profiled_ratio, 0.25),
              quantile(flops.profiled_ratio, 0.75), median(flops.profiled_cpu_ratio),
              quantile(flops.profiled_cpu_ratio, 0.25), quantile(flops.profiled_cpu_ratio, 0.75));
  std::printf("%-22s %9.2f %9.2f %9.4f   %6.4f..%6.4f %9.4f   %6.4f..%6.4f\n", "after them",
              median(flops.on_after_ms), median(flops.off_after_ms), median(flops.after_ratio),
              quantile(flops.after_ratio, 0.25), quantile(flops.after_ratio, 0.75),
              median(flops.after_cpu_ratio), quantile(flops.after_cpu_ratio, 0.25),
              quantile(flops.after_cpu_ratio, 0.75));
  std::printf("  (after them, CPU ms per step: on %.3f, off %.3f)\n", median(flops.on_after_cpu_ms),
              median(flops.off_after_cpu_ms));

  if (flops_only) {
    fathom::fs::remove_tree(report_dir());
    return 0;
  }
  const std::string load_after_loops = load_average();
  const double step_ops = ops_per_step(loop);
  const Micro m = micro(micro_iters, loop);
  std::printf("\nper call (median of 5 x %d):\n", micro_iters);
  std::printf("  phase scope, begin+end            %8.0f ns  (session off: %.1f ns)\n",
              m.phase_scope_ns, m.phase_scope_off_ns);
  std::printf("  module scope (watched module)     %8.0f ns\n", m.module_scope_ns);
  std::printf("  one ATen op (at::mul, 4 floats)   %8.0f ns  (%.0f RecordFunction call(s) each)\n",
              m.op_ns, m.ops_per_call);
  std::printf("  + fathom op callback              %8.0f ns  (+shapes: %.0f ns)%s\n",
              m.fathom_op_ns, m.fathom_op_shapes_ns,
              fathom::nvtx::tool_attached() ? "" : "  [not registered: no NVTX tool]");
  std::printf(
      "  + fathom FLOP callback            %8.0f ns  (at::mm 2x2, counted: %.0f ns; profiled "
      "steps only)\n",
      m.flop_op_ns, m.flop_mm_ns);
  std::printf("  + torch profiler (Kineto, CPU)    %8.0f ns\n", m.kineto_op_ns);
  std::printf("  + torch emit_nvtx                 %8.0f ns\n", m.emit_nvtx_op_ns);

  // On a GPU the wall time is what a user pays; on a shared CPU-only machine, CPU time is the
  // measure that neighbours disturb least.
  auto overhead = [&](const char* name) {
    for (const auto& v : variants)
      if (v.name == name && v.unavailable.empty()) return median(cuda ? v.ratio : v.cpu_ratio) - 1;
    return 0.0;
  };
  const double phases = overhead("fathom phases"), ops = overhead("fathom ops"),
               kin = overhead("torch profiler");
  const double step_ns = median(variants[0].step_ms) * 1e6;
  // A step opens 1 step + 5 phase-like scopes (2 copies, forward, backward, optimizer).
  const double scope_share = 6 * m.phase_scope_ns / step_ns;
  const double fathom_ops_share = step_ops * m.fathom_op_ns / step_ns;
  const double kineto_ops_share = step_ops * m.kineto_op_ns / step_ns;
  std::printf(
      "\none training step: %.1f ms, %.0f ATen ops (RecordFunction calls, forward and backward); "
      "load average %s after the loops\n",
      step_ns / 1e6, step_ops, load_after_loops.c_str());
  std::printf(
      "\ntargets (measured: median of per-repetition %s ratios; derived: per-call costs x calls "
      "per step):\n",
      cuda ? "wall-time" : "CPU-time");
  std::printf(
      "  phase level, target < 1%% of step time: measured %+.2f%%, derived %.4f%% (6 scopes x %.0f "
      "ns)\n",
      phases * 100, scope_share * 100, m.phase_scope_ns);
  std::printf(
      "  op level, target < 0.5 x the torch profiler's: measured fathom %+.2f%% vs profiler "
      "%+.2f%%",
      ops * 100, kin * 100);
  if (kin > 0) std::printf(" (%.2f x)", ops / kin);
  std::printf(
      ";\n    derived fathom %.2f%% vs profiler %.2f%% (%.0f ops x %.0f ns vs %.0f ns) = %.2f x\n",
      fathom_ops_share * 100, kineto_ops_share * 100, step_ops, m.fathom_op_ns, m.kineto_op_ns,
      m.kineto_op_ns > 0 ? m.fathom_op_ns / m.kineto_op_ns : 0.0);
  fathom::fs::remove_tree(report_dir());
  return 0;
} catch (const std::exception& e) {
  std::cerr << "overhead_bench: " << e.what() << "\n";
  return 2;
}
