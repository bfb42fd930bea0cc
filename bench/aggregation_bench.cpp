// Online aggregation of GPU activity: records per second on one core, and resident memory, over
// 10 million replayed synthetic records, next to the same records merely generated and next to
// keeping them all. Also the replay of an activity file (record and replay) for scale.
//
// The synthetic run: steps of a training loop as the CUPTI collector would deliver them, with
// annotations for the step and its phases, kernel launches (runtime calls) and their kernels
// from a pool of 300 distinct names (Tensor Core GEMMs, CUDA-core elementwise, NCCL), eligible
// ATen ops with shapes, and host-to-device copies; flush() at every step end, as the session does.
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "aggregate/gpu_aggregator.h"
#include "analyze/activity_replay.h"
#include "collect/process_memory.h"
#include "records/activity_file.h"
#include "records/file_system.h"

namespace {

using namespace fathom;

constexpr std::int64_t kRecords = 10'000'000;
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

StepTemplate make_step() {
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
    k.name = kernel_name((i * 7) % kDistinctNames);
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

}  // namespace

int main() {
  const StepTemplate tpl = make_step();
  std::printf(
      "aggregation_bench: %lld synthetic records, steps of %lld (%d kernels + launches, %d ops, %d "
      "copies, 5 "
      "annotations), %d kernel names; one thread, times are its CPU time\n\n",
      static_cast<long long>(kRecords), static_cast<long long>(tpl.records()), kKernelsPerStep,
      kOpsPerStep, kCopiesPerStep, kDistinctNames);

  // 1. Generating the records alone: the cost the aggregation is measured above.
  std::int64_t checksum = 0;
  double t0 = thread_seconds();
  replay(tpl, kRecords, [&](const StepTemplate& s) {
    each_record(s, [&](const auto& r) { checksum += r.end_ns; });
  });
  const double generate_s = seconds_since(t0);

  // 2. Generating and aggregating, flushing at each step end; resident memory along the way.
  reset_peak_rss();
  const std::int64_t rss_start = rss();
  std::vector<std::pair<std::int64_t, std::int64_t>> rss_at;  // (records, rss)
  GpuAggregator agg;
  std::int64_t added = 0, next_sample = 1'000'000;
  t0 = thread_seconds();
  const std::int64_t steps = replay(tpl, kRecords, [&](const StepTemplate& s) {
    each_record(s, [&](const auto& r) { agg.add(r); });
    agg.flush();
    added += s.records();
    if (added >= next_sample) {
      rss_at.emplace_back(added, rss());
      next_sample += next_sample < 5'000'000 ? 4'000'000 : 5'000'000;
    }
  });
  const double aggregate_s = seconds_since(t0);
  const GpuAggregate a = agg.snapshot();
  const std::int64_t rss_end = rss();
  const std::int64_t rss_peak = peak_rss_bytes().value_or(0);

  const double agg_only_s = aggregate_s - generate_s;
  std::printf("  %-34s %8.2f s  %7.2f M records/s\n", "generate only", generate_s,
              kRecords / generate_s / 1e6);
  std::printf("  %-34s %8.2f s  %7.2f M records/s\n", "generate + aggregate (+ flush/step)",
              aggregate_s, kRecords / aggregate_s / 1e6);
  std::printf("  %-34s %8.2f s  %7.2f M records/s  (%.0f ns a record)\n", "aggregation alone",
              agg_only_s, kRecords / agg_only_s / 1e6, agg_only_s / kRecords * 1e9);
  std::printf(
      "  steps %lld, records counted %lld, kernel rows %zu, eligible op keys %zu, late %lld, "
      "dropped %lld\n\n",
      static_cast<long long>(steps), static_cast<long long>(a.records), a.kernels.size(),
      a.eligible_ops.size(), static_cast<long long>(a.late_records),
      static_cast<long long>(a.dropped_records));

  std::printf("  resident memory: start %.1f MiB", mib(rss_start));
  for (const auto& [n, b] : rss_at)
    std::printf(", after %lldM %.1f MiB", static_cast<long long>(n / 1'000'000), mib(b));
  std::printf(", end %.1f MiB, peak %.1f MiB (growth %.1f MiB over %lld records)\n", mib(rss_end),
              mib(rss_peak), mib(rss_end - rss_start), static_cast<long long>(kRecords));

  // 3. Keeping every record instead (what a trace holds), measured on 1 M and scaled.
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
    std::printf(
        "  keeping every record instead: %.1f MiB per 1 M records -> ~%.2f GiB for 10 M "
        "(aggregator: %.1f MiB)\n\n",
        mib(per_million), mib(per_million) * 10 / 1024, mib(rss_end - rss_start));
  }

  // 4. Record and replay: 1 M records written to an activity file and replayed through the
  // analyses.
  {
    const std::string path = fs::temp_directory() + "/fathom_aggregation_bench_" +
                             std::to_string(::getpid()) + ".jsonl.gz";
    t0 = thread_seconds();
    ActivityFileWriter w(path);
    replay(tpl, 1'000'000, [&](const StepTemplate& s) {
      GpuActivity b;
      b.annotations = s.annotations;
      b.ops = s.ops;
      b.runtime_calls = s.launches;
      b.kernels = s.kernels;
      b.memcpys = s.copies;
      w.write(b);
    });
    const std::int64_t written = w.records();
    w.close();
    const double write_s = seconds_since(t0);
    GpuAggregator replayed;
    t0 = thread_seconds();
    replay_activity(path, replayed);
    const double replay_s = seconds_since(t0);
    std::printf(
        "  activity file (.jsonl.gz), %lld records: write %.2f s (%.2f M/s), replay into the "
        "aggregator %.2f s "
        "(%.2f M records/s)\n",
        static_cast<long long>(written), write_s, written / write_s / 1e6, replay_s,
        written / replay_s / 1e6);
    std::remove(path.c_str());
  }
  return checksum == 42 ? 1 : 0;  // keeps the generate-only loop from being optimized away
}
