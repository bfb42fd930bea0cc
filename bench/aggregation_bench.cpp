// Online aggregation of GPU activity: records per second on one core (CPU time, min / median /
// max over repetitions, next to wall time), instructions per record under callgrind when valgrind
// is installed, resident memory over 100 million replayed synthetic records, next to the same
// records merely generated and next to keeping them all. Also the replay of an activity file
// (record and replay) for scale.
//
// The synthetic run: steps of a training loop as the CUPTI collector would deliver them, with
// annotations for the step and its phases, kernel launches (runtime calls) and their kernels
// from a pool of 300 distinct names (Tensor Core GEMMs, CUDA-core elementwise, NCCL), eligible
// ATen ops with shapes, and host-to-device copies that arrive after the step's kernels although
// they ran before them (out of order, as CUPTI delivers copies from their own buffers); flush()
// at every step end, as the session does. Kernel records carry the name key CUPTI's shared name
// pointer gives the collector.
//
//   aggregation_bench [--records=N] [--repeats=N] [--memory-records=N] [--callgrind-records=N]
//                     [--file-records=N]        (0 skips a section)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define FATHOM_HAVE_CALLGRIND 1
#endif

#include "aggregate/gpu_aggregator.h"
#include "analyze/activity_replay.h"
#include "base/file_system.h"
#include "collect/process_memory.h"
#include "formats/activity_file.h"

namespace {

using namespace fathom;

constexpr int kKernelsPerStep = 600;
constexpr int kOpsPerStep = 100;
constexpr int kCopiesPerStep = 4;
constexpr int kDistinctNames = 300;

// CPU time of this thread: "on one core", whatever else the machine is running.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}
double seconds_since(double t0) { return thread_seconds() - t0; }
double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double mib(std::int64_t b) { return static_cast<double>(b) / (1 << 20); }
std::int64_t rss() { return current_rss_bytes().value_or(0); }

// One step's records, replayed with shifted times and fresh correlation ids.
struct StepTemplate {
  std::vector<AnnotationRecord> annotations;
  std::vector<OpRecord> ops;
  std::vector<RuntimeCallRecord> launches;
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> copies;

  std::int64_t records() const {
    return static_cast<std::int64_t>(annotations.size() + ops.size() + launches.size() +
                                     kernels.size() + copies.size());
  }
};

std::string kernel_name(int i) {
  switch (i % 5) {
    case 0:
      return "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_"
             "tensor16x8x16_"
             "execute_kernel_variant_" +
             std::to_string(i);
    case 1:
      return "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
             "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, "
             "at::detail::Array<char*, 3>) #" +
             std::to_string(i);
    case 2:
      return "volta_sgemm_128x64_nn_" + std::to_string(i);
    case 3:
      return "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, "
             "float const*) #" +
             std::to_string(i);
    default:
      return i % 30 == 4
                 ? "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>) #" +
                       std::to_string(i)
                 : "void at::native::reduce_kernel<512, 1> #" + std::to_string(i);
  }
}

// keyed: kernel records carry a name key (CUPTI's name pointer, one per distinct name).
StepTemplate make_step(bool keyed) {
  StepTemplate s;
  const std::int64_t us = 1000;
  s.annotations = {{"step", 1, 0, 20'000 * us},
                   {"data", 1, 0, 1'000 * us},
                   {"forward", 1, 1'000 * us, 7'000 * us},
                   {"backward", 1, 7'000 * us, 18'000 * us},
                   {"optimizer", 1, 18'000 * us, 20'000 * us}};
  for (int i = 0; i < kOpsPerStep; ++i) {
    OpRecord o;
    o.name = i % 2 ? "aten::mm" : "aten::addmm";
    o.thread = 1;
    o.start_ns = (1'000 + i * 160) * us;
    o.end_ns = o.start_ns + 20 * us;
    o.external_id = static_cast<std::uint64_t>(i + 1);
    o.input_shapes = i % 2
                         ? std::vector<std::vector<std::int64_t>>{{64, 1024}, {1024, 1000 + i % 8}}
                         : std::vector<std::vector<std::int64_t>>{{1024}, {64, 1024}, {1024, 1024}};
    o.input_dtypes = {"c10::BFloat16", "c10::BFloat16", "c10::BFloat16"};
    s.ops.push_back(std::move(o));
  }
  for (int i = 0; i < kKernelsPerStep; ++i) {
    const std::int64_t launch = (1'000 + i * 28) * us;
    RuntimeCallRecord r;
    r.name = "cudaLaunchKernel";
    r.thread = 1;
    r.start_ns = launch;
    r.end_ns = launch + 4 * us;
    r.correlation_id = static_cast<std::uint64_t>(i + 1);
    s.launches.push_back(r);
    KernelRecord k;
    const int name = (i * 7) % kDistinctNames;
    k.name = kernel_name(name);
    k.name_key = keyed ? static_cast<std::uint64_t>(name + 1) : 0;
    k.stream = (i % 30 == 4) ? 20 : 7;
    k.start_ns = launch + 10 * us;
    k.end_ns = k.start_ns + (i % 3 ? 25 : 5) * us;
    k.correlation_id = r.correlation_id;
    k.external_id = i % 6 == 0 ? static_cast<std::uint64_t>(i / 6 + 1) : 0;
    s.kernels.push_back(std::move(k));
  }
  for (int i = 0; i < kCopiesPerStep; ++i) {
    MemcpyRecord m;
    m.kind = MemcpyKind::HostToDevice;
    m.src = MemoryKind::Pinned;
    m.dst = MemoryKind::Device;
    m.async = true;
    m.bytes = 4 << 20;
    m.start_ns = (900 + i * 20) * us;
    m.end_ns = m.start_ns + 15 * us;
    s.copies.push_back(m);
  }
  return s;
}

// Replays steps until `records` records have been handed to sink; returns the steps made.
template <typename Sink>
std::int64_t replay(const StepTemplate& tpl, std::int64_t records, Sink&& sink) {
  StepTemplate s = tpl;
  const std::int64_t step_ns = 20'000'000;
  std::int64_t done = 0, step = 0;
  while (done < records) {
    const std::int64_t shift = step * step_ns;
    const auto corr = static_cast<std::uint64_t>(step) * 1'000'000;
    auto moved = [&](auto& to, const auto& from) {
      to.start_ns = from.start_ns + shift;
      to.end_ns = from.end_ns + shift;
    };
    for (std::size_t i = 0; i < s.annotations.size(); ++i)
      moved(s.annotations[i], tpl.annotations[i]);
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      moved(s.ops[i], tpl.ops[i]);
      s.ops[i].external_id = tpl.ops[i].external_id + corr;
    }
    for (std::size_t i = 0; i < s.launches.size(); ++i) {
      moved(s.launches[i], tpl.launches[i]);
      s.launches[i].correlation_id = tpl.launches[i].correlation_id + corr;
    }
    for (std::size_t i = 0; i < s.kernels.size(); ++i) {
      moved(s.kernels[i], tpl.kernels[i]);
      s.kernels[i].correlation_id = tpl.kernels[i].correlation_id + corr;
      if (tpl.kernels[i].external_id) s.kernels[i].external_id = tpl.kernels[i].external_id + corr;
    }
    for (std::size_t i = 0; i < s.copies.size(); ++i) moved(s.copies[i], tpl.copies[i]);
    sink(s);
    done += s.records();
    ++step;
  }
  return step;
}

// What a step hands to the aggregator: host records first, then what the GPU did.
template <typename Add>
void each_record(const StepTemplate& s, Add&& add) {
  for (const auto& r : s.annotations) add(r);
  for (const auto& r : s.ops) add(r);
  for (const auto& r : s.launches) add(r);
  for (const auto& r : s.kernels) add(r);
  for (const auto& r : s.copies) add(r);
}

struct Options {
  std::int64_t records = 10'000'000;
  int repeats = 5;
  std::int64_t memory_records = 100'000'000;
  std::int64_t callgrind_records = 1'000'000;
  std::int64_t file_records = 1'000'000;
  std::string child;  // "generate" / "aggregate": one instrumented section, run under callgrind
};

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const auto eq = a.find('=');
    const std::string_view key = a.substr(0, eq);
    const std::string value(eq == std::string_view::npos ? "" : a.substr(eq + 1));
    char* end = nullptr;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    const bool number = !value.empty() && *end == '\0' && n >= 0;
    if (key == "--child" && (value == "generate" || value == "aggregate")) {
      o.child = value;
    } else if (number && key == "--records" && n > 0) {
      o.records = n;
    } else if (number && key == "--repeats" && n > 0) {
      o.repeats = static_cast<int>(n);
    } else if (number && key == "--memory-records") {
      o.memory_records = n;
    } else if (number && key == "--callgrind-records") {
      o.callgrind_records = n;
    } else if (number && key == "--file-records") {
      o.file_records = n;
    } else {
      std::fprintf(stderr,
                   "aggregation_bench: bad argument '%s'. Usage: aggregation_bench [--records=N] "
                   "[--repeats=N] [--memory-records=N] [--callgrind-records=N] "
                   "[--file-records=N] (counts are whole numbers; 0 skips a section)\n",
                   argv[i]);
      return std::nullopt;
    }
  }
  return o;
}

struct Spread {
  double min = 0, median = 0, max = 0;
};
Spread spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {v.front(), median, v.back()};
}

std::int64_t generate_only(const StepTemplate& tpl, std::int64_t records) {
  std::int64_t checksum = 0;
  replay(tpl, records, [&](const StepTemplate& s) {
    each_record(s, [&](const auto& r) { checksum += r.end_ns; });
  });
  return checksum;
}

GpuAggregate aggregate_all(const StepTemplate& tpl, std::int64_t records) {
  GpuAggregator agg;
  replay(tpl, records, [&](const StepTemplate& s) {
    each_record(s, [&](const auto& r) { agg.add(r); });
    agg.flush();
  });
  return agg.snapshot();
}

// The instrumented part of a callgrind run starts after this many records: by then every name
// has been classified and every array has grown, so the count is the steady state's.
constexpr std::int64_t kCallgrindWarmup = 100'000;

// Records in the steps replayed after the warm-up (replay() hands out whole steps).
std::int64_t instrumented_records(const StepTemplate& tpl, std::int64_t records) {
  const std::int64_t step = tpl.records();
  const std::int64_t warm_steps = (kCallgrindWarmup + step - 1) / step;
  const std::int64_t all_steps = (kCallgrindWarmup + records + step - 1) / step;
  return (all_steps - warm_steps) * step;
}

// One section, instrumented after the warm-up: the parent reads its instruction count.
int callgrind_child(const Options& o, const StepTemplate& tpl) {
#ifdef FATHOM_HAVE_CALLGRIND
  if (!RUNNING_ON_VALGRIND) {
    std::fprintf(stderr, "aggregation_bench: --child runs under valgrind --tool=callgrind only\n");
    return 2;
  }
  std::int64_t checksum = 0, seen = 0;
  bool on = false;
  const auto after_step = [&](const StepTemplate& s) {
    seen += s.records();
    if (!on && seen >= kCallgrindWarmup) {
      CALLGRIND_START_INSTRUMENTATION;
      on = true;
    }
  };
  const std::int64_t records = kCallgrindWarmup + o.records;
  if (o.child == "generate") {
    replay(tpl, records, [&](const StepTemplate& s) {
      each_record(s, [&](const auto& r) { checksum += r.end_ns; });
      after_step(s);
    });
  } else {
    GpuAggregator agg;
    replay(tpl, records, [&](const StepTemplate& s) {
      each_record(s, [&](const auto& r) { agg.add(r); });
      agg.flush();
      after_step(s);
    });
    checksum = agg.snapshot().records;
  }
  CALLGRIND_STOP_INSTRUMENTATION;
  return checksum == 42 ? 1 : 0;
#else
  (void)o;
  (void)tpl;
  std::fprintf(stderr, "aggregation_bench: built without valgrind/callgrind.h\n");
  return 2;
#endif
}

// Instructions executed by one section under callgrind; nullopt when it could not be run.
std::optional<double> callgrind_instructions(const std::string& section, std::int64_t records) {
  char self[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return std::nullopt;
  const std::string out = fs::temp_directory() + "/fathom_aggregation_bench_" +
                          std::to_string(::getpid()) + "_" + section + ".callgrind";
  const std::string cmd = "valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file='" +
                          out + "' '" + std::string(self) + "' --child=" + section +
                          " --records=" + std::to_string(records) + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  std::optional<double> ir;
  std::ifstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("totals:", 0) == 0 || line.rfind("summary:", 0) == 0)
      ir = std::strtod(line.c_str() + line.find(':') + 1, nullptr);
  std::remove(out.c_str());
  if (rc != 0) return std::nullopt;
  return ir;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Options> parsed = parse(argc, argv);
  if (!parsed) return 2;
  const Options& o = *parsed;
  const StepTemplate tpl = make_step(true);
  if (!o.child.empty()) return callgrind_child(o, tpl);

  std::printf(
      "aggregation_bench: steps of %lld records (%d kernels + launches, %d ops, %d copies "
      "delivered after the kernels, 5 annotations), %d kernel names; one thread, a flush per "
      "step\n\n",
      static_cast<long long>(tpl.records()), kKernelsPerStep, kOpsPerStep, kCopiesPerStep,
      kDistinctNames);

  // 1. Throughput: generating alone and generating + aggregating, side by side in each repetition;
  // the aggregation is the difference. CPU time of this thread ("one core"), and wall time.
  std::int64_t checksum = 0;
  std::vector<double> gen_cpu, agg_cpu, agg_wall, alone, alone_unkeyed;
  GpuAggregate a;
  const StepTemplate unkeyed = make_step(false);
  for (int rep = 0; rep < o.repeats; ++rep) {
    double t0 = thread_seconds();
    checksum += generate_only(tpl, o.records);
    gen_cpu.push_back(seconds_since(t0));
    const double w0 = wall_seconds();
    t0 = thread_seconds();
    a = aggregate_all(tpl, o.records);
    agg_cpu.push_back(seconds_since(t0));
    agg_wall.push_back(wall_seconds() - w0);
    alone.push_back(o.records / (agg_cpu.back() - gen_cpu.back()) / 1e6);
    // The same records without the name key (a trace or replay file): every name hashed.
    t0 = thread_seconds();
    const GpuAggregate u = aggregate_all(unkeyed, o.records);
    alone_unkeyed.push_back(o.records / (seconds_since(t0) - gen_cpu.back()) / 1e6);
    checksum += u.records;
  }
  const Spread g = spread(gen_cpu), c = spread(agg_cpu), w = spread(agg_wall), r = spread(alone),
               ru = spread(alone_unkeyed);
  std::printf("throughput: %lld records, %d repetitions (min / median / max)\n",
              static_cast<long long>(o.records), o.repeats);
  std::printf("  %-36s CPU %6.3f / %6.3f / %6.3f s\n", "generate only", g.min, g.median, g.max);
  std::printf("  %-36s CPU %6.3f / %6.3f / %6.3f s   wall %6.3f / %6.3f / %6.3f s\n",
              "generate + aggregate (+ flush/step)", c.min, c.median, c.max, w.min, w.median,
              w.max);
  std::printf("  %-36s %6.2f / %6.2f / %6.2f M records/s  (%.1f ns a record, median)\n",
              "aggregation alone, CPU time", r.min, r.median, r.max, 1e3 / r.median);
  std::printf("  %-36s %6.2f / %6.2f / %6.2f M records/s\n", "... kernel names without a key",
              ru.min, ru.median, ru.max);
  std::printf(
      "  records counted %lld, kernel rows %zu, eligible op keys %zu, late %lld, dropped %lld\n\n",
      static_cast<long long>(a.records), a.kernels.size(), a.eligible_ops.size(),
      static_cast<long long>(a.late_records), static_cast<long long>(a.dropped_records));

  // 2. Instructions per record: deterministic where CPU time on a shared machine is not.
  if (o.callgrind_records > 0) {
#ifdef FATHOM_HAVE_CALLGRIND
    const bool have = std::system("command -v valgrind >/dev/null 2>&1") == 0;
#else
    const bool have = false;
#endif
    const auto gen = have ? callgrind_instructions("generate", o.callgrind_records) : std::nullopt;
    const auto agg = have ? callgrind_instructions("aggregate", o.callgrind_records) : std::nullopt;
    if (gen && agg) {
      const auto per = static_cast<double>(instrumented_records(tpl, o.callgrind_records));
      std::printf(
          "instructions (valgrind --tool=callgrind, %.0f records after %lld of warm-up): "
          "generate %.1f, generate + aggregate %.1f, aggregation alone %.1f a record\n\n",
          per, static_cast<long long>(kCallgrindWarmup), *gen / per, *agg / per,
          (*agg - *gen) / per);
    } else {
      std::printf("instructions: not measured (%s)\n\n",
                  have ? "the callgrind run failed" : "valgrind is not installed");
    }
  }

  // 3. Resident memory over a long run: sampled every 10 M records.
  if (o.memory_records > 0) {
    reset_peak_rss();
    const std::int64_t rss_start = rss();
    std::vector<std::pair<std::int64_t, std::int64_t>> rss_at;  // (records, rss)
    std::int64_t added = 0, next_sample = 10'000'000;
    GpuAggregator agg;
    replay(tpl, o.memory_records, [&](const StepTemplate& s) {
      each_record(s, [&](const auto& rec) { agg.add(rec); });
      agg.flush();
      added += s.records();
      if (added >= next_sample) {
        rss_at.emplace_back(added, rss());
        next_sample += 10'000'000;
      }
    });
    checksum += agg.snapshot().records;
    const std::int64_t rss_end = rss(), rss_peak = peak_rss_bytes().value_or(0);
    std::printf("resident memory over %lld records: start %.1f MiB",
                static_cast<long long>(o.memory_records), mib(rss_start));
    for (const auto& [n, b] : rss_at)
      std::printf(", %lldM %.1f", static_cast<long long>(n / 1'000'000), mib(b));
    const std::int64_t after_first = rss_at.empty() ? rss_start : rss_at.front().second;
    std::printf(", end %.1f MiB; peak %.1f MiB; growth after the first 10 M records %.1f MiB\n\n",
                mib(rss_end), mib(rss_peak), mib(rss_end - after_first));
  }

  // 4. Keeping every record instead (what a trace holds), measured on 1 M and scaled.
  {
    const std::int64_t before = rss();
    GpuActivity all;
    replay(tpl, 1'000'000, [&](const StepTemplate& s) {
      all.annotations.insert(all.annotations.end(), s.annotations.begin(), s.annotations.end());
      all.ops.insert(all.ops.end(), s.ops.begin(), s.ops.end());
      all.runtime_calls.insert(all.runtime_calls.end(), s.launches.begin(), s.launches.end());
      all.kernels.insert(all.kernels.end(), s.kernels.begin(), s.kernels.end());
      all.memcpys.insert(all.memcpys.end(), s.copies.begin(), s.copies.end());
    });
    const std::int64_t per_million = rss() - before;
    std::printf("keeping every record instead: %.1f MiB per 1 M records -> ~%.2f GiB for 100 M\n\n",
                mib(per_million), mib(per_million) * 100 / 1024);
  }

  // 5. Record and replay: records written to an activity file and replayed into the aggregator.
  if (o.file_records > 0) {
    const std::string path = fs::temp_directory() + "/fathom_aggregation_bench_" +
                             std::to_string(::getpid()) + ".jsonl.gz";
    double t0 = thread_seconds();
    ActivityFileWriter wr(path);
    replay(tpl, o.file_records, [&](const StepTemplate& s) {
      GpuActivity b;
      b.annotations = s.annotations;
      b.ops = s.ops;
      b.runtime_calls = s.launches;
      b.kernels = s.kernels;
      b.memcpys = s.copies;
      wr.write(b);
    });
    const std::int64_t written = wr.records();
    wr.close();
    const double write_s = seconds_since(t0);
    GpuAggregator replayed;
    t0 = thread_seconds();
    replay_activity(path, replayed);
    const double replay_s = seconds_since(t0);
    std::printf(
        "activity file (.jsonl.gz), %lld records: write %.2f s (%.2f M/s), replay into the "
        "aggregator %.2f s (%.2f M records/s), CPU time\n",
        static_cast<long long>(written), write_s, written / write_s / 1e6, replay_s,
        written / replay_s / 1e6);
    std::remove(path.c_str());
  }
  return checksum == 42 ? 1 : 0;  // keeps the generate-only loop from being optimized away
}
