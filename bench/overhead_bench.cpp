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
//                  [--flops-only] [--instructions CALLGRIND_OUT_FILE [--calls N]]
//
// --flops-only: the FLOP counting rows alone (counted steps and the steps after them, on vs off).
// --instructions: under callgrind (bench/instruction_counts.sh runs it), the per-op, per-scope and
// per-step costs in instructions instead of time: --calls ops or scopes a section (2000), --steps
// steps a loop section, --reps repetitions. Counts do not move with the machine's load.
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

#include "base/file_system.h"
#include "callgrind_sections.h"
#include "collect/clock.h"
#include "collect/host_info.h"
#include "collect/nvtx.h"
#include "collect/process_memory.h"
#include "example_args.h"
#include "framework/session_access.h"
#include "measure/flop_counter_extension.h"
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

// Per-call wall and CPU time of one body, one entry per repetition.
struct Timed {
  std::vector<double> wall, cpu;
};

template <typename F>
void time_calls(Timed& out, int iters, F&& body) {
  const std::int64_t c0 = cpu_now_ns(), t0 = fathom::now_ns();
  for (int i = 0; i < iters; ++i) body();
  const std::int64_t t1 = fathom::now_ns(), c1 = cpu_now_ns();
  out.wall.push_back(static_cast<double>(t1 - t0) / iters);
  out.cpu.push_back(static_cast<double>(c1 - c0) / iters);
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

// A per-call cost: the median over repetitions, and the 25th..75th percentiles, of wall and CPU
// time, less the same of a baseline where one is given (the bare op).
struct Cost {
  double wall = 0, cpu = 0, cpu_lo = 0, cpu_hi = 0;
  bool measured = false;
};

Cost cost(const Timed& t, const Timed* base = nullptr, double per = 1) {
  if (t.wall.empty()) return {};
  const double bw = base ? median(base->wall) : 0, bc = base ? median(base->cpu) : 0;
  return {(median(t.wall) - bw) / per, (median(t.cpu) - bc) / per,
          (quantile(t.cpu, 0.25) - bc) / per, (quantile(t.cpu, 0.75) - bc) / per, true};
}

struct Micro {
  Cost phase_scope, phase_scope_off, module_scope, rss_read, op;
  Cost fathom_op, fathom_op_shapes, kineto_op, emit_nvtx_op;
  Cost flop_op, flop_mm;  // in a profiled step: an op not counted, one counted
  double ops_per_call = 0;
  int reps = 0;
};

Micro micro(int iters, Loop& loop) {
  Micro m;
  m.reps = 7;
  Timed phase, phase_off, module, rss, base, fat, fat_shapes, kin, nvtx, flop, mm_base, flop_mm;
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
  for (int r = 0; r < m.reps; ++r) {
    {
      fathom::Session s(fathom_options(fathom::NvtxLevel::Phases, false, false));
      auto e = s.epoch();
      auto step = e.step(1);
      time_calls(phase, iters, [&] { auto f = step.forward(); });
    }
    {
      fathom::Session s(
          fathom_options(fathom::NvtxLevel::Phases, false, false).mode(fathom::Mode::Off));
      auto e = s.epoch();
      auto step = e.step(1);
      time_calls(phase_off, iters, [&] { auto f = step.forward(); });
    }
    {
      fathom::Session s(fathom_options(fathom::NvtxLevel::Modules, false, false));
      s.watch(*loop.model());
      time_calls(module, iters, [&] { fathom::ModuleScope range(block); });
    }
    time_calls(rss, iters / 10, [] { (void)fathom::current_rss_bytes(); });
    time_calls(base, iters, op);
    {
      fathom::Session s(fathom_options(fathom::NvtxLevel::Ops, false, false));
      time_calls(fat, iters, op);
    }
    {
      fathom::Session s(fathom_options(fathom::NvtxLevel::Ops, true, false));
      time_calls(fat_shapes, iters, op);
    }
    time_calls(mm_base, iters, mm);
    {
      // Inside a profiled step the FLOP callback is registered.
      fathom::Session s(fathom_options(fathom::NvtxLevel::Phases, false, false));
      auto e = s.epoch();
      auto step = e.step(1);
      time_calls(flop, iters, op);
      time_calls(flop_mm, iters, mm);
    }
    for (bool emit : {false, true}) {
      prof::ProfilerConfig config(emit ? prof::ProfilerState::NVTX : prof::ProfilerState::KINETO);
      const auto acts = emit ? std::set<prof::ActivityType>{} : activities(false);
      try {
        if (!emit) kineto::prepareProfiler(config, acts);
        kineto::enableProfiler(config, acts);
        time_calls(emit ? nvtx : kin, iters, op);
        kineto::disableProfiler();
      } catch (const std::exception&) {
      }
    }
    std::fprintf(stderr, "\rper-call repetition %d/%d", r + 1, m.reps);
  }
  std::fprintf(stderr, "\r\033[K");
  const double per_op = m.ops_per_call > 0 ? m.ops_per_call : 1;
  m.phase_scope = cost(phase);
  m.phase_scope_off = cost(phase_off);
  m.module_scope = cost(module);
  m.rss_read = cost(rss);
  m.op = cost(base, nullptr, per_op);
  m.fathom_op = cost(fat, &base, per_op);
  m.fathom_op_shapes = cost(fat_shapes, &base, per_op);
  m.kineto_op = cost(kin, &base, per_op);
  m.emit_nvtx_op = cost(nvtx, &base, per_op);
  m.flop_op = cost(flop, &base, per_op);
  m.flop_mm = cost(flop_mm, &mm_base);
  return m;
}

void print_cost(const char* name, const Cost& c, const char* note = "") {
  if (!c.measured) {
    std::printf("  %-34s %9s   (not measured)%s\n", name, "-", note);
    return;
  }
  std::printf("  %-34s %9.0f %9.0f   %7.0f..%-7.0f%s\n", name, c.wall, c.cpu, c.cpu_lo, c.cpu_hi,
              note);
}

// --- instruction counts (callgrind) -----------------------------------------------------------

struct Spread {
  double median = 0, lo = 0, hi = 0;
};
Spread spread(const std::vector<double>& v) {
  if (v.empty()) return {};
  return {quantile(v, 0.5), *std::min_element(v.begin(), v.end()),
          *std::max_element(v.begin(), v.end())};
}

// The per-op and per-scope costs, and the loop's, counted in instructions under callgrind: each
// section runs once uncounted (first sightings, allocator, Kineto's first start), then `reps` times
// counted. Sessions, profilers and their setup stay outside the counted sections.
void instruction_counts(const std::string& out_file, Loop& loop, int ops, int scopes, int steps,
                        int reps) {
  const double step_ops = ops_per_step(loop);
  fathom::bench::CallgrindSections cg(out_file);
  auto a = torch::ones({4}), b = torch::ones({4});
  auto op_loop = [&] {
    for (int i = 0; i < ops; ++i) (void)at::mul(a, b);
  };
  // Instructions per call of body (run `calls` times), once warm.
  auto counted = [&](std::vector<double>& out, int calls, auto&& body) {
    body();
    out.push_back(static_cast<double>(cg.count(body)) / calls);
  };
  std::vector<double> plain, fat, fat_shapes, kin, emit, phase, phase_reads, phase_off, rss;
  for (int r = 0; r < reps; ++r) {
    counted(plain, ops, op_loop);
    {
      fathom::Session s(fathom_options(fathom::NvtxLevel::Ops, false, false));
      counted(fat, ops, op_loop);
    }
    {
      fathom::Session s(fathom_options(fathom::NvtxLevel::Ops, true, false));
      counted(fat_shapes, ops, op_loop);
    }
    for (bool nvtx : {false, true}) {
      prof::ProfilerConfig config(nvtx ? prof::ProfilerState::NVTX : prof::ProfilerState::KINETO);
      const auto acts = nvtx ? std::set<prof::ActivityType>{} : activities(false);
      if (!nvtx) kineto::prepareProfiler(config, acts);
      kineto::enableProfiler(config, acts);
      counted(nvtx ? emit : kin, ops, op_loop);
      kineto::disableProfiler();
    }
    for (bool on : {true, false}) {
      fathom::Session s(fathom_options(fathom::NvtxLevel::Phases, false, false)
                            .mode(on ? fathom::Mode::Suggest : fathom::Mode::Off));
      auto e = s.epoch();
      auto step = e.step(1);
      auto body = [&] {
        for (int i = 0; i < scopes; ++i) auto f = step.forward();
      };
      body();
      const fathom::detail::SessionState* state = fathom::detail::SessionAccess::state(s);
      const std::int64_t reads0 = state ? state->resident().readings() : 0;
      (on ? phase : phase_off).push_back(static_cast<double>(cg.count(body)) / scopes);
      if (on && state)
        phase_reads.push_back(static_cast<double>(state->resident().readings() - reads0));
    }
    counted(rss, scopes, [&] {
      for (int i = 0; i < scopes; ++i) (void)fathom::current_rss_bytes();
    });
    std::fprintf(stderr, "\rinstruction counts: repetition %d/%d (per call)", r + 1, reps);
  }
  // The loop, once (a step is ~100 M instructions, minutes under callgrind): `steps` steps after
  // one warm-up step each. FLOP counting is off here: it would add its callback to the first
  // kFlopProfiledSteps steps of each fathom variant (its cost is the FLOP rows of the timed run).
  std::vector<double> l_plain, l_phases, l_modules, l_ops, l_kineto;
  {
    {
      auto body = [&] {
        for (int i = 0; i < steps; ++i) loop.plain_step(i);
      };
      counted(l_plain, steps, body);
    }
    for (auto [level, out] : {std::pair{fathom::NvtxLevel::Phases, &l_phases},
                              std::pair{fathom::NvtxLevel::Modules, &l_modules},
                              std::pair{fathom::NvtxLevel::Ops, &l_ops}}) {
      fathom::Session session(fathom_options(level, false, false).count_flops(false));
      session.watch(*loop.model());
      auto e = session.epoch();
      counted(*out, steps, [&] {
        for (int i = 0; i < steps; ++i) loop.fathom_step(e, i);
      });
    }
    {
      prof::ProfilerConfig config(prof::ProfilerState::KINETO);
      const auto acts = activities(false);
      kineto::prepareProfiler(config, acts);
      kineto::enableProfiler(config, acts);
      counted(l_kineto, steps, [&] {
        for (int i = 0; i < steps; ++i) loop.plain_step(i);
      });
      kineto::disableProfiler();
    }
  }
  std::fprintf(stderr, "\r\033[K");

  const double base = spread(plain).median;
  auto added = [&](const std::vector<double>& v) {
    Spread x = spread(v);
    return Spread{x.median - base, x.lo - base, x.hi - base};
  };
  const Spread f = added(fat), fs = added(fat_shapes), k = added(kin), en = added(emit);
  std::printf(
      "\ninstructions (callgrind; median of %d repetitions, min..max; every instruction of the "
      "process in the section):\n",
      reps);
  std::printf("  one ATen op (at::mul, 4 floats)   %8.0f  %8.0f..%-8.0f (%d calls a repetition)\n",
              base, spread(plain).lo, spread(plain).hi, ops);
  std::printf("  + fathom op callback              %8.0f  %8.0f..%-8.0f%s\n", f.median, f.lo, f.hi,
              fathom::nvtx::tool_attached() ? "" : "  [not registered: no NVTX tool]");
  std::printf("  + fathom op callback, +shapes     %8.0f  %8.0f..%-8.0f\n", fs.median, fs.lo,
              fs.hi);
  std::printf("  + torch profiler (Kineto, CPU)    %8.0f  %8.0f..%-8.0f\n", k.median, k.lo, k.hi);
  std::printf("  + torch emit_nvtx                 %8.0f  %8.0f..%-8.0f\n", en.median, en.lo,
              en.hi);
  if (k.median > 0)
    std::printf("  fathom op callback / Kineto's collection, per op: %.3f x (target <= 0.4)\n",
                f.median / k.median);
  const Spread ph = spread(phase), rd = spread(rss);
  const double reads_per_scope = spread(phase_reads).median / scopes;
  std::printf(
      "  phase scope, begin+end            %8.0f  %8.0f..%-8.0f (session off: %.0f)\n"
      "    of which /proc reads: %.4f a scope here (one read: %.0f instructions); callgrind's\n"
      "    ~50x slowdown lets 1 ms pass in fewer scopes than natively, so without them: %.0f\n",
      ph.median, ph.lo, ph.hi, spread(phase_off).median, reads_per_scope, rd.median,
      ph.median - reads_per_scope * rd.median);
  const double lp = spread(l_plain).median;
  std::printf("\n  one training step (%d counted once, %.0f ATen ops; FLOP counting off):\n", steps,
              step_ops);
  for (auto [name, v] : {std::pair{"plain loop", &l_plain}, std::pair{"fathom phases", &l_phases},
                         std::pair{"fathom modules", &l_modules}, std::pair{"fathom ops", &l_ops},
                         std::pair{"torch profiler", &l_kineto}}) {
    const Spread x = spread(*v);
    std::printf("    %-20s %12.0f %+8.3f%%\n", name, x.median, (x.median / lp - 1) * 100);
  }
  const double fathom_per_op = (spread(l_ops).median - spread(l_modules).median) / step_ops;
  const double kineto_per_op = (spread(l_kineto).median - lp) / step_ops;
  std::printf(
      "  in the loop, per op: fathom's op callback (ops - modules) %.0f vs Kineto's (profiler - "
      "plain) %.0f = %.3f x (target <= 0.4)\n",
      fathom_per_op, kineto_per_op, kineto_per_op > 0 ? fathom_per_op / kineto_per_op : 0.0);
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
  std::setvbuf(stdout, nullptr, _IOLBF,
               0);  // lines as they come, also into a file or under valgrind
  examples::Args defaults;
  defaults.steps = 10;
  defaults.epochs = 7;  // repetitions; --reps below
  std::vector<char*> rest{argv[0]};
  int micro_iters = 100000, counted_calls = 2000;
  bool flops_only = false;
  std::string instructions;  // callgrind's --callgrind-out-file
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--flops-only")
      flops_only = true;
    else if (k == "--instructions" && i + 1 < argc)
      instructions = argv[++i];
    else if (k == "--calls" && i + 1 < argc)
      counted_calls = std::stoi(argv[++i]);
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

  if (!instructions.empty()) {
    instruction_counts(instructions, loop, counted_calls, counted_calls, steps, reps);
    fathom::fs::remove_tree(report_dir());
    return 0;
  }
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
  std::printf(
      "\nper call, ns (median of %d repetitions x %d calls; CPU p25..p75 over the repetitions):\n",
      m.reps, micro_iters);
  std::printf("  %-34s %9s %9s   %s\n", "", "wall", "cpu", "cpu p25..p75");
  print_cost("phase scope, begin+end", m.phase_scope);
  print_cost("phase scope, session off", m.phase_scope_off);
  print_cost("module scope (watched module)", m.module_scope);
  print_cost("one /proc/self/statm read", m.rss_read,
             "  (a CPU phase end reads it at most once a ms)");
  char note[96];
  std::snprintf(note, sizeof note, "  (%.0f RecordFunction call(s) each)", m.ops_per_call);
  print_cost("one ATen op (at::mul, 4 floats)", m.op, note);
  print_cost("+ fathom op callback", m.fathom_op,
             fathom::nvtx::tool_attached() ? "" : "  [not registered: no NVTX tool]");
  print_cost("+ fathom op callback, +shapes", m.fathom_op_shapes);
  print_cost("+ fathom FLOP callback (at::mul)", m.flop_op, "  (profiled steps only)");
  print_cost("+ fathom FLOP callback (at::mm 2x2)", m.flop_mm, "  (counted; profiled steps only)");
  print_cost("+ torch profiler (Kineto, CPU)", m.kineto_op);
  print_cost("+ torch emit_nvtx", m.emit_nvtx_op);
  if (m.kineto_op.cpu > 0)
    std::printf("  fathom op callback / Kineto's, per op: %.3f x CPU time, %.3f x wall time\n",
                m.fathom_op.cpu / m.kineto_op.cpu, m.fathom_op.wall / m.kineto_op.wall);

  // On a GPU the wall time is what a user pays; on a shared CPU-only machine, CPU time is the
  // measure that neighbours disturb least.
  auto overhead = [&](const char* name) {
    for (const auto& v : variants)
      if (v.name == name && v.unavailable.empty()) return median(cuda ? v.ratio : v.cpu_ratio) - 1;
    return 0.0;
  };
  const double phases = overhead("fathom phases"), ops = overhead("fathom ops"),
               kin = overhead("torch profiler");
  // The step in the same measure as the per-call costs it is set against (CPU time on a CPU).
  const double step_ns = median(cuda ? variants[0].step_ms : variants[0].cpu_ms) * 1e6;
  // A step opens 1 step + 5 phase-like scopes (2 copies, forward, backward, optimizer).
  const double scope_share = 6 * m.phase_scope.cpu / step_ns;
  const double fathom_ops_share = step_ops * m.fathom_op.cpu / step_ns;
  const double kineto_ops_share = step_ops * m.kineto_op.cpu / step_ns;
  std::printf(
      "\none training step: %.1f ms wall, %.1f ms CPU, %.0f ATen ops (RecordFunction calls, "
      "forward "
      "and backward); load average %s after the loops\n",
      median(variants[0].step_ms), median(variants[0].cpu_ms), step_ops, load_after_loops.c_str());
  std::printf(
      "\ntargets (measured: median of per-repetition %s ratios; derived: per-call costs x calls "
      "per step):\n",
      cuda ? "wall-time" : "CPU-time");
  std::printf(
      "  phase level, target < 1%% of step time: measured %+.2f%%, derived %.4f%% (6 scopes x %.0f "
      "ns CPU)\n",
      phases * 100, scope_share * 100, m.phase_scope.cpu);
  std::printf(
      "  op level, target < 0.5 x the torch profiler's: measured fathom %+.2f%% vs profiler "
      "%+.2f%%",
      ops * 100, kin * 100);
  if (kin > 0) std::printf(" (%.2f x)", ops / kin);
  std::printf(
      ";\n    derived fathom %.2f%% vs profiler %.2f%% (%.0f ops x %.0f ns vs %.0f ns CPU) = %.2f "
      "x\n",
      fathom_ops_share * 100, kineto_ops_share * 100, step_ops, m.fathom_op.cpu, m.kineto_op.cpu,
      m.kineto_op.cpu > 0 ? m.fathom_op.cpu / m.kineto_op.cpu : 0.0);
  fathom::fs::remove_tree(report_dir());
  return 0;
} catch (const std::exception& e) {
  std::cerr << "overhead_bench: " << e.what() << "\n";
  return 2;
}
