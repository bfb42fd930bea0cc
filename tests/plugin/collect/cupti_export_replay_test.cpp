// Issue 23: the live path on real GPU data. One device's records from a real two-GPU H100 Nsight
// export are replayed through the CUPTI stand-in as the program made them: each CUDA call of the
// export's runtime table (its cbid, thread id, correlation id and times), then the kernels (their
// mangled names), copies and memsets it launched, at the export's own device times on their
// streams. The export's clock is moved onto the stand-in's (one offset: every gap, overlap and
// duration as recorded), and the stand-in's replay clock follows the program through the export's
// time, so it delivers as CUPTI does whatever this machine's load: one buffer per stream of CUDA's
// record sizes, a non-forced flush at each step end that returns only complete buffers (a kernel
// still running at the step's end holds its stream's buffer back; the loop has no sync of its
// own, only the export's), a forced flush at the epoch's end. fathom's ops are the export's
// eligible emit_nvtx op ranges (their ids pushed around the calls inside them, as the op hooks
// do), its phases tile the export's span in steps of ~100 calls, each ending between ops.
//
// The reference is `fathom analyze` of the same export (analyze_nsight_export, the device's own
// section): the live collector's summary must give the same kernels, copies by direction, busy
// share, idle gaps, Tensor Core share by name and by op; memsets and the per-name kernel table,
// which that section does not list, are checked against the export's rows. Under 1% of the live
// path's kernel time may be unattributed to its phase. Optionally with Kineto's TSC timestamps
// (CUPTI's records in ticks, which fathom converts), and with a torch.profiler profile started
// and stopped inside one phase (that step's work is the profile's or lost, the rest fathom's).
#include <fathom/replay.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <thread>

#include "advise/export_analysis.h"
#include "aggregate/tensor_core_ops.h"
#include "analyze/gpu_pipeline.h"
#include "base/annotation_roles.h"
#include "base/kernel_name.h"
#include "formats/activity_batches.h"
#include "kineto_lookalike.h"
#include "standin_fixture.h"

namespace fathom {
namespace {

// fathom's enums back to CUPTI's, for the stand-in to write into its records.
std::uint8_t cupti_copy_kind(MemcpyKind k) {
  switch (k) {
    case MemcpyKind::HostToDevice:
      return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    case MemcpyKind::DeviceToHost:
      return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    case MemcpyKind::DeviceToDevice:
      return CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    case MemcpyKind::HostToHost:
      return CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
    case MemcpyKind::PeerToPeer:
      return CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    case MemcpyKind::Unknown:
      break;
  }
  return CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
}

std::uint8_t cupti_memory_kind(MemoryKind k) {
  switch (k) {
    case MemoryKind::Pageable:
      return CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    case MemoryKind::Pinned:
      return CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    case MemoryKind::Device:
      return CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    case MemoryKind::Managed:
      return CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
    case MemoryKind::Unknown:
      break;
  }
  return CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN;
}

// The export's ids are per process (the reader puts a process slot in the high half); CUPTI's
// are the low half. Its thread ids are Nsight's global ids: the thread is the low 24 bits.
std::uint32_t cupti_correlation(std::uint64_t id) { return static_cast<std::uint32_t>(id); }
std::uint32_t cupti_thread(std::uint64_t global_tid) {
  return static_cast<std::uint32_t>(global_tid & 0xffffffu);
}

// fathom places CUPTI's records on its clock through an offset it measures, off by a host clock
// read's spread (tens of ns here); fathom's phases are on its clock already. What depends on
// where the two meet (the window's ends: the first and last records may be of either; the idle
// time at them) holds within kAlignNs; what CUPTI's records give alone (durations, busy time,
// every gap between GPU work and why) does not depend on it.
constexpr std::int64_t kAlignNs = 1000;

struct Tolerance {
  // With TSC ticks every time goes through two measured rates: a duration holds within this
  // share of itself; a time between records delivered apart (converted by fits a few samples
  // apart), within this share of the window, and a gap whose ends were that close may open,
  // close or change cause.
  double relative = 0;
  std::int64_t window_ns = 0;
  // A sum of `records` durations, each rounded to a ns at both ends.
  bool operator()(std::int64_t got, std::int64_t want, std::int64_t records = 1) const {
    return std::abs(static_cast<double>(got - want)) <=
           relative * static_cast<double>(std::abs(want)) +
               (relative > 0 ? 2.0 * static_cast<double>(records) : 0.0);
  }
  // A time measured between records of the two clocks, or of deliveries apart.
  bool aligned(std::int64_t got, std::int64_t want) const {
    return std::abs(static_cast<double>(got - want)) <=
           relative * static_cast<double>(window_ns) + static_cast<double>(kAlignNs);
  }
};

// One CUDA call of the export as the replay makes it, with the GPU work it launched.
struct Call {
  standin::RecordedCall call;
  std::int64_t start = 0, end = 0;                     // the export's clock
  std::vector<std::size_t> kernels, memcpys, memsets;  // rows of the export's device records
  std::uint64_t op = 0;  // fathom's id of the innermost eligible op around it, 0 if none
  bool made_up = false;  // the export has no call for this work (launched before the capture)
};

// An eligible op as fathom's op hooks record it: its id pushed around the calls inside it.
struct EligibleOp {
  OpRecord record;  // the export's times and thread
  std::uint64_t id = 0;
};

class ExportReplayTest : public testing::StandinTest {
 protected:
  // Exactly what `fathom analyze` reads for the device's own section: its GPU work and the host
  // records of the processes that used it.
  static GpuActivity device_records(const std::string& path, std::int32_t device) {
    GpuActivity all;
    NsightReadOptions o;
    o.device = device;
    read_nsight_export(
        path, [&](GpuActivity&& b) { detail::append_batch(all, std::move(b)); }, o);
    return all;
  }

  struct Replay {
    std::int32_t device = 0;
    // Kineto's TSC timestamp callback registered before the run (it stays for the rest of the
    // process after any torch.profiler profile): CUPTI's timestamps are ticks, 2.5 a ns.
    bool tsc = false;
    // A profile started inside this step's one phase, at its first eligible op past a third of
    // its calls (fathom's op hooks notice a profile there), and stopped after two thirds; the
    // step before it waits for the device (a logging step), so fathom holds no buffer the
    // profile could take. 0: none.
    int profile_step = 0;
  };

  // The calls in the order the program made them (by their end: CUPTI writes an API record at
  // the call's exit), each with its GPU work; work the export has no call for gets one made up
  // at the capture's first instant, as CUPTI would have had it.
  std::vector<Call> plan_calls(const GpuActivity& ex, std::int64_t first, std::uint64_t main) {
    std::vector<Call> calls;
    std::map<std::uint64_t, std::size_t> by_correlation;
    for (const RuntimeCallRecord& r : ex.runtime_calls) {
      Call c;
      const bool runtime = r.name.rfind("cuda", 0) == 0;
      c.call.domain = runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
      c.call.cbid = cupti->cbid_of(c.call.domain, r.name.c_str());
      EXPECT_NE(c.call.cbid, 0u) << r.name << ": not a call of this CUDA's CUPTI";
      c.call.thread_id = cupti_thread(r.thread);
      c.call.correlation_id = cupti_correlation(r.correlation_id);
      c.start = r.start_ns;
      c.end = r.end_ns;
      if (r.correlation_id) by_correlation[r.correlation_id] = calls.size();
      calls.push_back(std::move(c));
    }
    auto made_up = [&](const char* name, std::uint64_t correlation) -> Call& {
      if (correlation) by_correlation[correlation] = calls.size();
      Call c;
      c.call.cbid = cupti->cbid_of(CUPTI_CB_DOMAIN_RUNTIME_API, name);
      c.call.thread_id = cupti_thread(main);
      c.call.correlation_id = cupti_correlation(correlation);
      c.start = c.end = first;
      c.made_up = true;
      calls.push_back(std::move(c));
      return calls.back();
    };
    auto owner = [&](std::uint64_t correlation, const char* name) -> Call& {
      auto it = by_correlation.find(correlation);
      return it != by_correlation.end() ? calls[it->second] : made_up(name, correlation);
    };
    for (std::size_t i = 0; i < ex.kernels.size(); ++i)
      owner(ex.kernels[i].correlation_id, "cudaLaunchKernel").kernels.push_back(i);
    for (std::size_t i = 0; i < ex.memcpys.size(); ++i)
      owner(ex.memcpys[i].correlation_id, "cudaMemcpyAsync").memcpys.push_back(i);
    for (std::size_t i = 0; i < ex.memsets.size(); ++i)
      owner(ex.memsets[i].correlation_id, "cudaMemsetAsync").memsets.push_back(i);
    std::stable_sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) {
      return a.end != b.end ? a.end < b.end : a.start < b.start;
    });
    return calls;
  }

  // The export's eligible ops (fathom's hooks record no others), each call tagged with the
  // innermost one open on its thread when it was made, as CUPTI's stack would have it.
  static std::vector<EligibleOp> tag_calls(const GpuActivity& ex, std::vector<Call>& calls) {
    std::vector<EligibleOp> ops;
    for (const OpRecord& o : ex.ops) {
      if (!tensor_core_eligible_op(o.name)) continue;
      EligibleOp e;
      e.record = o;
      e.record.thread = cupti_thread(o.thread);
      e.id = ops.size() + 1;
      e.record.external_id = e.id;
      ops.push_back(std::move(e));
    }
    for (Call& c : calls) {
      const EligibleOp* inner = nullptr;
      for (const EligibleOp& o : ops)
        if (o.record.thread == c.call.thread_id && o.record.start_ns <= c.start &&
            o.record.end_ns > c.start && (!inner || o.record.start_ns >= inner->record.start_ns))
          inner = &o;
      if (inner && !c.made_up) c.op = inner->id;
    }
    return ops;
  }

  void replay_and_compare(const std::string& path) { replay_and_compare(path, Replay{}); }
  void replay_and_compare(const std::string& path, const Replay& opt) {
#ifndef FATHOM_TEST_HAVE_SQLITE
    GTEST_SKIP() << "fathom was built without libsqlite3 (not found, or FATHOM_WITH_SQLITE=OFF): "
                    "it cannot read the Nsight export "
                 << path << " this test replays";
#endif
    const GpuActivity ex = device_records(path, opt.device);
    ASSERT_GT(ex.kernels.size(), 1000u);
    ASSERT_GT(ex.memcpys.size(), 100u);
    ASSERT_GT(ex.memsets.size(), 10u);
    ASSERT_GT(ex.runtime_calls.size(), 1000u);

    // The span `fathom analyze` measures the device against: every record of the section.
    std::int64_t first = std::numeric_limits<std::int64_t>::max(), last = 0;
    auto span = [&](const auto& records) {
      for (const auto& r : records) {
        first = std::min(first, r.start_ns);
        last = std::max(last, r.end_ns);
      }
    };
    span(ex.kernels);
    span(ex.memcpys);
    span(ex.memsets);
    span(ex.runtime_calls);
    span(ex.syncs);
    span(ex.ops);
    span(ex.annotations);
    // The thread that made most calls: the training loop's, where fathom's phases are.
    std::map<std::uint64_t, int> calls_of;
    for (const RuntimeCallRecord& r : ex.runtime_calls) ++calls_of[r.thread];
    const std::uint64_t main =
        std::max_element(calls_of.begin(), calls_of.end(), [](const auto& a, const auto& b) {
          return a.second < b.second;
        })->first;
    std::vector<Call> calls = plan_calls(ex, first, main);
    const std::vector<EligibleOp> ops = tag_calls(ex, calls);
    ASSERT_GT(ops.size(), 100u);

    std::unique_ptr<testing::KinetoLookalike> kineto;
    if (opt.tsc || opt.profile_step > 0) {
      kineto = std::make_unique<testing::KinetoLookalike>(*cupti);
      config.known_clients.push_back({"torch.profiler (Kineto)",
                                      [&kineto] { return kineto->active(); },
                                      {"kineto"},
                                      [&kineto] { return kineto->records_gpu(); }});
    }
    if (opt.tsc) cupti->register_timestamp_callback(&testing::KinetoLookalike::tsc);
    auto c = start();
    ASSERT_TRUE(c->collecting()) << testing::all_notes(c->not_measured());
    if (opt.tsc) {
      // The run up to the replayed span, as a loop's first steps: the rates measured between
      // ticks and ns (the stand-in's, fathom's) over 20 ms, not the 0.2 ms of their first
      // readings, since the span's records lie up to 0.3 s from where they are converted.
      for (int i = 0; i < 4; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        (void)cupti->timestamp();
        c->flush(false);
      }
    }

    // The export's clock onto the host's: one offset, the whole run just past (fathom takes
    // records from up to a second before it started collecting). The replay's host keeps the
    // export's time on the stand-in's replay clock, whatever this machine's load.
    ASSERT_LT(last - first, 900'000'000);
    const std::int64_t offset = now_ns() - 1'000'000 - last;
    auto host = [offset](std::int64_t t) { return t + offset; };
    auto reach = [this](std::int64_t t) { cupti->set_replay_time(t); };
    std::vector<standin::RecordedGpu> gpu;
    auto replay = [&](const Call& call) {
      gpu.clear();
      for (std::size_t i : call.kernels) {
        const KernelRecord& k = ex.kernels[i];
        standin::RecordedGpu g;
        g.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        g.device = static_cast<std::uint32_t>(k.device);
        g.stream = static_cast<std::uint32_t>(k.stream);
        g.start_ns = host(k.start_ns);
        g.end_ns = host(k.end_ns);
        g.name = k.name.c_str();
        g.grid[0] = k.grid_x;
        g.grid[1] = k.grid_y;
        g.grid[2] = k.grid_z;
        g.block[0] = k.block_x;
        g.block[1] = k.block_y;
        g.block[2] = k.block_z;
        gpu.push_back(g);
      }
      for (std::size_t i : call.memcpys) {
        const MemcpyRecord& m = ex.memcpys[i];
        standin::RecordedGpu g;
        g.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        g.device = static_cast<std::uint32_t>(m.device);
        g.stream = static_cast<std::uint32_t>(m.stream);
        g.start_ns = host(m.start_ns);
        g.end_ns = host(m.end_ns);
        g.copy_kind = cupti_copy_kind(m.kind);
        g.src_kind = cupti_memory_kind(m.src);
        g.dst_kind = cupti_memory_kind(m.dst);
        // CUPTI's record always says; the export's call does, where it has the call. A copy
        // launched before the capture came from cudaMemcpyAsync (the call made up for it).
        g.async = m.async_known ? m.async : true;
        g.bytes = static_cast<std::uint64_t>(m.bytes);
        gpu.push_back(g);
      }
      for (std::size_t i : call.memsets) {
        const MemsetRecord& m = ex.memsets[i];
        standin::RecordedGpu g;
        g.kind = CUPTI_ACTIVITY_KIND_MEMSET;
        g.device = static_cast<std::uint32_t>(m.device);
        g.stream = static_cast<std::uint32_t>(m.stream);
        g.start_ns = host(m.start_ns);
        g.end_ns = host(m.end_ns);
        g.bytes = static_cast<std::uint64_t>(m.bytes);
        gpu.push_back(g);
      }
      standin::RecordedCall rc = call.call;
      rc.start_ns = host(call.start);
      rc.end_ns = host(call.end);
      reach(rc.end_ns);  // the record is written at the call's exit
      if (call.op) {
        c->notice_clients();  // as the op hooks do before pushing the op's id
        push_external_id(ExternalIdKind::Op, call.op);
      }
      cupti->replay_call(rc, gpu.data(), gpu.size());
      if (call.op) pop_external_id(ExternalIdKind::Op);
      return call.kernels.size();
    };

    // Ops are handed over at their end (the op hooks' on_end), in that order.
    std::vector<const EligibleOp*> by_end;
    for (const EligibleOp& o : ops) by_end.push_back(&o);
    std::sort(by_end.begin(), by_end.end(), [](const EligibleOp* a, const EligibleOp* b) {
      return a->record.end_ns < b->record.end_ns;
    });
    std::size_t next_op = 0;
    auto ops_ended_by = [&](std::int64_t t) {
      for (; next_op < by_end.size() && by_end[next_op]->record.end_ns <= t; ++next_op) {
        OpRecord r = by_end[next_op]->record;
        r.start_ns = host(r.start_ns);
        r.end_ns = host(r.end_ns);
        reach(r.end_ns);
        c->add_op(std::move(r));
      }
    };
    // A step ends between ops, as a training loop's does: never inside an eligible op.
    auto inside_an_op = [&](std::int64_t t) {
      return std::any_of(ops.begin(), ops.end(), [t](const EligibleOp& o) {
        return o.record.start_ns < t && o.record.end_ns > t;
      });
    };

    std::vector<AnnotationRecord> phases;
    constexpr std::size_t kPerStep = 100;
    // The calls of the profiled step: their GPU work is the profile's, or lost with fathom's
    // buffers of that step which the profile's callbacks got.
    std::size_t lost_from = 0, lost_to = 0;
    int profiled_kernels = 0;
    bool profile_started = false;
    std::int64_t phase_begin = first;
    // Steps that ended with their GPU work still running (the step end's flush cannot return
    // that stream's buffer): what a loop without a sync per step does.
    std::int64_t gpu_busy_until = 0;
    int steps_ending_before_their_work = 0;
    std::size_t i = 0;
    while (i < calls.size()) {
      ++step_no;
      const bool profiled = step_no == opt.profile_step;
      if (profiled) lost_from = i;
      c->check_clients();
      const std::size_t phase_calls_from = i;
      push_external_id(ExternalIdKind::Phase, phase_external_id(Phase::Forward));
      for (std::size_t n = 0; i < calls.size(); ++n, ++i) {
        if (n >= kPerStep && !inside_an_op(calls[i - 1].end) && !inside_an_op(calls[i].start))
          break;
        if (profiled && !profile_started && n >= kPerStep / 3 && calls[i].op) {
          ASSERT_TRUE(kineto->init());
          kineto->prepare();
          kineto->start();
          profile_started = true;
        }
        ops_ended_by(calls[i].end);
        if (kineto && kineto->active()) {
          kineto->push_op(5000 + n);
          profiled_kernels += static_cast<int>(replay(calls[i]));
          kineto->pop_op();
          if (n + 1 >= 2 * kPerStep / 3) kineto->stop();
        } else {
          replay(calls[i]);
        }
      }
      pop_external_id(ExternalIdKind::Phase);
      // The phases tile the export's span: the next step's starts where this one ends.
      const std::int64_t phase_end = i < calls.size() ? calls[i].start : last;
      ops_ended_by(phase_end);
      reach(host(phase_end));
      phases.push_back(
          classified_annotation("forward", cupti_thread(main), host(phase_begin), host(phase_end)));
      phase_begin = phase_end;
      for (std::size_t j = phase_calls_from; j < i; ++j)
        for (std::size_t k : calls[j].kernels)
          gpu_busy_until = std::max(gpu_busy_until, ex.kernels[k].end_ns);
      steps_ending_before_their_work += gpu_busy_until > phase_end;
      if (profiled) lost_to = i;
      if (step_no + 1 == opt.profile_step) cupti->wait_gpu();
      c->flush(false);  // the step end: no sync
      if (profiled) {
        EXPECT_EQ(c->state(), CuptiState::Collecting) << testing::all_notes(c->not_measured());
      }
    }
    ASSERT_GT(step_no, 10) << "steps of the replay";
    // Most steps end before their kernels do: their stream's buffer comes back at a later step
    // end (after one of the export's syncs) or at the epoch's.
    EXPECT_GT(steps_ending_before_their_work, step_no / 2);
    const auto with_kernels = std::count_if(
        batches.begin(), batches.end(), [](const GpuActivity& b) { return !b.kernels.empty(); });
    EXPECT_LT(with_kernels, step_no / 2) << "deliveries with kernels";
    ops_ended_by(last);
    cupti->wait_gpu();
    c->flush(true);  // the epoch's end
    if (opt.profile_step > 0) {
      ASSERT_TRUE(profile_started) << "no eligible op in the profiled step's middle third";
      ASSERT_GT(lost_to, lost_from);
      EXPECT_GT(profiled_kernels, 0);
      EXPECT_EQ(kineto->seen().kernels, profiled_kernels) << "the profile's own kernels";
      EXPECT_EQ(kineto->seen().foreign_correlation, 0) << "fathom's ids in the profile's records";
    }

    GpuPipeline live;
    for (const AnnotationRecord& a : phases) live.add(a);
    for (const GpuActivity& b : batches) {
      live.add(b);
      live.step_end();
    }
    const GpuAggregate got = live.aggregate();
    const GpuSummary mine = live.summary({});
    EXPECT_EQ(got.dropped_records, 0) << testing::all_notes(c->not_measured());
    EXPECT_EQ(got.late_records, 0) << "records that came back after their time was swept";
    EXPECT_EQ(got.forgotten_launches, 0);

    // What fathom was owed: the export less the profiled step's GPU work.
    std::vector<bool> kernel_lost(ex.kernels.size()), memcpy_lost(ex.memcpys.size()),
        memset_lost(ex.memsets.size());
    for (std::size_t j = lost_from; j < lost_to; ++j) {
      for (std::size_t k : calls[j].kernels) kernel_lost[k] = true;
      for (std::size_t k : calls[j].memcpys) memcpy_lost[k] = true;
      for (std::size_t k : calls[j].memsets) memset_lost[k] = true;
    }
    const bool whole = lost_to == lost_from;

    // Durations are CUPTI's own differences: exact, but with TSC ticks (registered at the start,
    // or by the profile) each goes through two measured rates (the stand-in's, fathom's) and is
    // rounded to a ns at each end.
    const double tolerance = opt.tsc || opt.profile_step > 0 ? 2e-3 : 0.0;
    const Tolerance near{tolerance};

    // Kernels by name: the export's rows (shown demangled), every one, against the live table.
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> by_name;
    std::int64_t owed_kernels = 0;
    for (std::size_t k = 0; k < ex.kernels.size(); ++k) {
      if (kernel_lost[k]) continue;
      auto& [count, ns] = by_name[normalize_kernel_name(ex.kernels[k].name)];
      ++count;
      ns += ex.kernels[k].end_ns - ex.kernels[k].start_ns;
      ++owed_kernels;
    }
    ASSERT_EQ(got.kernels.size(), by_name.size()) << testing::all_notes(c->not_measured());
    std::int64_t total = 0;
    for (const KernelStats& k : got.kernels) {
      ASSERT_TRUE(by_name.count(k.name)) << k.name;
      EXPECT_EQ(k.count, by_name[k.name].first) << k.name;
      EXPECT_TRUE(near(k.total_ns, by_name[k.name].second, k.count))
          << k.name << ": " << k.total_ns << " ns, the export " << by_name[k.name].second;
      EXPECT_NE(k.name.substr(0, 2), "_Z") << "shown demangled";
      total += k.total_ns;
    }
    // Every kernel to its phase: the launches' own ids (and the phase around an op's launch).
    const auto& unattributed = got.phases[kUnattributed];
    EXPECT_LT(static_cast<double>(unattributed.kernel_ns), 0.01 * static_cast<double>(total))
        << unattributed.kernel_count << " kernels unattributed";
    EXPECT_EQ(got.phases[static_cast<std::size_t>(Phase::Forward)].kernel_count +
                  unattributed.kernel_count,
              owed_kernels);
    // Memsets (the analysis lists none): the export's rows.
    std::int64_t memset_count = 0, memset_bytes = 0, memset_ns = 0;
    for (std::size_t k = 0; k < ex.memsets.size(); ++k) {
      if (memset_lost[k]) continue;
      ++memset_count;
      memset_bytes += ex.memsets[k].bytes;
      memset_ns += ex.memsets[k].end_ns - ex.memsets[k].start_ns;
    }
    EXPECT_EQ(got.memsets.count, memset_count);
    EXPECT_EQ(got.memsets.bytes, memset_bytes);
    EXPECT_TRUE(near(got.memsets.total_ns, memset_ns, memset_count))
        << got.memsets.total_ns << " ns, the export " << memset_ns;
    std::int64_t owed_memcpys = 0;
    for (bool lost : memcpy_lost) owed_memcpys += !lost;
    const auto& forward = got.phases[static_cast<std::size_t>(Phase::Forward)];
    EXPECT_EQ(forward.memcpy_count + unattributed.memcpy_count, owed_memcpys);
    EXPECT_LT(unattributed.memcpy_count, owed_memcpys / 100 + 1);

    c.reset();
    kineto.reset();
    if (!whole) return;  // the analysis is of the whole export: the profile took a step of it

    // `fathom analyze` of the export: the device's own section.
    const ExportAnalysis analysis = analyze_nsight_export(path, {});
    const auto dev = std::find_if(analysis.devices.begin(), analysis.devices.end(),
                                  [&](const DeviceAnalysis& d) { return d.device == opt.device; });
    ASSERT_NE(dev, analysis.devices.end());
    // The idle time before the device's first work, when the export has no call for it: the
    // analysis knows no launch ("other"); the call made up at the window's start is a late one.
    std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
    bool earliest_made_up = false;
    auto see = [&](const Call& call, std::int64_t start) {
      if (start < earliest) {
        earliest = start;
        earliest_made_up = call.made_up;
      }
    };
    for (const Call& call : calls) {
      for (std::size_t k : call.kernels) see(call, ex.kernels[k].start_ns);
      for (std::size_t k : call.memcpys) see(call, ex.memcpys[k].start_ns);
      for (std::size_t k : call.memsets) see(call, ex.memsets[k].start_ns);
    }
    compare(mine, dev->gpu, near, earliest_made_up ? earliest - first : 0);
  }

  // The live summary against the analysis's section for the device.
  static void compare(const GpuSummary& mine, const GpuSummary& want, Tolerance near,
                      std::int64_t late_first_launch) {
    near.window_ns = want.timeline.window_ns;
    // Tensor Cores: by name (every kernel's unit decided by its name in these exports) and by op.
    const TensorCoreResult& t = mine.tensor_cores;
    const TensorCoreResult& w = want.tensor_cores;
    EXPECT_EQ(t.kernel_count, w.kernel_count);
    EXPECT_TRUE(near(t.kernel_ns, w.kernel_ns, t.kernel_count))
        << t.kernel_ns << " " << w.kernel_ns;
    EXPECT_EQ(t.tensor_core_count, w.tensor_core_count);
    EXPECT_TRUE(near(t.tensor_core_ns, w.tensor_core_ns, t.tensor_core_count))
        << "Tensor Core time " << t.tensor_core_ns << " ns, the analysis " << w.tensor_core_ns;
    ASSERT_TRUE(t.share && w.share);
    EXPECT_NEAR(*t.share, *w.share, 2 * near.relative + 1e-12);
    EXPECT_GT(*t.share, 0.0);
    for (auto [a, b] :
         {std::pair{&t.decisions.tensor_cores_by_name, &w.decisions.tensor_cores_by_name},
          std::pair{&t.decisions.cuda_cores_by_name, &w.decisions.cuda_cores_by_name},
          std::pair{&t.decisions.tensor_cores_by_op, &w.decisions.tensor_cores_by_op},
          std::pair{&t.decisions.unknown, &w.decisions.unknown}}) {
      EXPECT_EQ(a->count, b->count);
      EXPECT_TRUE(near(a->ns, b->ns, a->count)) << a->ns << " " << b->ns;
    }
    ASSERT_EQ(t.families.size(), w.families.size());
    for (std::size_t i = 0; i < t.families.size(); ++i) {
      EXPECT_EQ(t.families[i].family, w.families[i].family);
      EXPECT_EQ(t.families[i].count, w.families[i].count) << w.families[i].family;
      EXPECT_TRUE(near(t.families[i].total_ns, w.families[i].total_ns, t.families[i].count))
          << w.families[i].family;
    }
    // By op: the analysis ties a kernel to the op range its launch fell in; the live path to the
    // op whose id CUPTI's stack held at the launch. The same ops, with the same kernels.
    EXPECT_TRUE(t.ops_recorded && w.ops_recorded);
    EXPECT_EQ(t.eligible_instances, w.eligible_instances);
    EXPECT_GT(w.eligible_with_kernels, 100);
    EXPECT_EQ(t.eligible_with_kernels, w.eligible_with_kernels);
    EXPECT_EQ(t.eligible_only_cuda_cores, w.eligible_only_cuda_cores);
    EXPECT_TRUE(near(t.eligible_cuda_core_ns, w.eligible_cuda_core_ns, t.eligible_instances));
    EXPECT_TRUE(near(t.eligible_unknown_ns, w.eligible_unknown_ns, t.eligible_instances));
    ASSERT_EQ(t.on_cuda_cores.size(), w.on_cuda_cores.size());
    for (std::size_t i = 0; i < t.on_cuda_cores.size(); ++i) {
      EXPECT_EQ(t.on_cuda_cores[i].op, w.on_cuda_cores[i].op);
      EXPECT_EQ(t.on_cuda_cores[i].shapes, w.on_cuda_cores[i].shapes);
      EXPECT_EQ(t.on_cuda_cores[i].instances, w.on_cuda_cores[i].instances);
    }
    ASSERT_EQ(t.misaligned.size(), w.misaligned.size());
    for (std::size_t i = 0; i < t.misaligned.size(); ++i) {
      EXPECT_EQ(t.misaligned[i].op, w.misaligned[i].op);
      EXPECT_EQ(t.misaligned[i].shapes, w.misaligned[i].shapes);
      EXPECT_EQ(t.misaligned[i].instances, w.misaligned[i].instances);
    }

    // Copies by direction. The export names the call of every copy but those launched before the
    // capture (the reader leaves those unknown); CUPTI's record always says, and the replay's
    // made-up cudaMemcpyAsync makes them asynchronous.
    const TransferResult& m = mine.transfers;
    const TransferResult& x = want.transfers;
    EXPECT_EQ(m.count, x.count);
    EXPECT_EQ(m.bytes, x.bytes);
    EXPECT_TRUE(near(m.total_ns, x.total_ns, m.count));
    EXPECT_TRUE(near(m.busy_ns, x.busy_ns, m.count)) << m.busy_ns << " " << x.busy_ns;
    EXPECT_TRUE(near(m.overlap_with_kernels_ns, x.overlap_with_kernels_ns, m.count));
    ASSERT_EQ(m.directions.size(), x.directions.size());
    for (std::size_t i = 0; i < m.directions.size(); ++i) {
      const TransferDirection& a = m.directions[i];
      const TransferDirection& b = x.directions[i];
      const std::string what(memcpy_kind_name(b.direction));
      EXPECT_EQ(a.direction, b.direction);
      EXPECT_EQ(a.count, b.count) << what;
      EXPECT_EQ(a.bytes, b.bytes) << what;
      EXPECT_TRUE(near(a.total_ns, b.total_ns, a.count)) << what;
      EXPECT_EQ(a.pageable_count, b.pageable_count) << what;
      EXPECT_EQ(a.pageable_bytes, b.pageable_bytes) << what;
      EXPECT_EQ(a.pinned_count, b.pinned_count) << what;
      EXPECT_EQ(a.pinned_bytes, b.pinned_bytes) << what;
      EXPECT_EQ(a.sync_count, b.sync_count) << what;
      EXPECT_EQ(a.async_count, b.async_count + b.unknown_call_count) << what;
      EXPECT_EQ(a.async_bytes, b.async_bytes + b.unknown_call_bytes) << what;
      EXPECT_EQ(a.unknown_call_count, 0) << what;
    }

    // The timeline: the same window (the export's span), busy time, idle gaps and why.
    const TimelineResult& l = mine.timeline;
    const TimelineResult& y = want.timeline;
    EXPECT_FALSE(l.window_from_steps);
    EXPECT_TRUE(near.aligned(l.window_ns, y.window_ns)) << l.window_ns << " " << y.window_ns;
    EXPECT_EQ(l.kernel_count, y.kernel_count);
    EXPECT_EQ(l.tiny_kernel_count, y.tiny_kernel_count);
    EXPECT_EQ(l.communication_kernels, y.communication_kernels);
    EXPECT_TRUE(near(l.communication_ns, y.communication_ns, l.communication_kernels));
    EXPECT_EQ(l.sync_calls, y.sync_calls);
    ASSERT_EQ(l.devices.size(), 1u);
    ASSERT_EQ(y.devices.size(), 1u);
    const DeviceTimeline& d = l.devices[0];
    const DeviceTimeline& e = y.devices[0];
    EXPECT_EQ(d.device, e.device);
    EXPECT_TRUE(near(d.busy_ns, e.busy_ns, l.kernel_count)) << d.busy_ns << " " << e.busy_ns;
    EXPECT_TRUE(near(d.kernel_ns, e.kernel_ns, l.kernel_count))
        << d.kernel_ns << " " << e.kernel_ns;
    EXPECT_TRUE(near(d.communication_ns, e.communication_ns, l.communication_kernels));
    EXPECT_TRUE(near(d.communication_overlap_ns, e.communication_overlap_ns, l.kernel_count));
    ASSERT_TRUE(d.busy_share && e.busy_share);
    EXPECT_NEAR(*d.busy_share, *e.busy_share,
                2 * near.relative + 2.0 * kAlignNs / static_cast<double>(y.window_ns))
        << "busy " << d.busy_ns << " of " << l.window_ns << " ns, the analysis " << e.busy_ns
        << " of " << y.window_ns;
    EXPECT_TRUE(near.aligned(d.idle_ns, e.idle_ns)) << d.idle_ns << " " << e.idle_ns;
    // Gaps between GPU work are CUPTI's alone; one may open at each end of the window.
    EXPECT_LE(std::abs(d.idle.gaps - e.idle.gaps),
              2 + std::llround(near.relative * static_cast<double>(e.idle.gaps)))
        << d.idle.gaps << " " << e.idle.gaps;
    EXPECT_TRUE(near.aligned(d.idle.data_wait_ns, e.idle.data_wait_ns))
        << d.idle.data_wait_ns << " " << e.idle.data_wait_ns;
    EXPECT_TRUE(near.aligned(d.idle.sync_ns, e.idle.sync_ns))
        << d.idle.sync_ns << " " << e.idle.sync_ns;
    EXPECT_TRUE(near.aligned(d.idle.host_launch_ns, e.idle.host_launch_ns + late_first_launch))
        << d.idle.host_launch_ns << " " << e.idle.host_launch_ns << " + " << late_first_launch;
    EXPECT_TRUE(near.aligned(d.idle.other_ns, e.idle.other_ns - late_first_launch))
        << d.idle.other_ns << " " << e.idle.other_ns << " - " << late_first_launch;
  }
};

TEST_F(ExportReplayTest, TheBeforeExportThroughTheLivePathMatchesItsAnalysis) {
  replay_and_compare(FATHOM_TEST_TRACES "/nsys_mfu_2gpu_before.sqlite");
}

TEST_F(ExportReplayTest, TheAfterExportThroughTheLivePathMatchesItsAnalysis) {
  replay_and_compare(FATHOM_TEST_TRACES "/nsys_mfu_2gpu_after.sqlite");
}

// The second GPU's records (its own streams, kernels and process) through the same path.
TEST_F(ExportReplayTest, TheBeforeExportsSecondDeviceMatchesItsAnalysis) {
  replay_and_compare(FATHOM_TEST_TRACES "/nsys_mfu_2gpu_before.sqlite", {.device = 1});
}

TEST_F(ExportReplayTest, TheAfterExportsSecondDeviceMatchesItsAnalysis) {
  replay_and_compare(FATHOM_TEST_TRACES "/nsys_mfu_2gpu_after.sqlite", {.device = 1});
}

// CUPTI's timestamps in Kineto's TSC ticks: fathom measures the rate and converts. Every duration
// goes through the stand-in's rate (within 4e-4 of the truth) and fathom's (refined at each step
// end), so the totals hold within the 2e-3 asked, in every run and under load.
TEST_F(ExportReplayTest, TscTimestampsAreConvertedOntoFathomsClock) {
  replay_and_compare(FATHOM_TEST_TRACES "/nsys_mfu_2gpu_before.sqlite", {.tsc = true});
}

// A profile inside one phase mid-epoch: that step is the profile's; every other step is fathom's,
// attributed as before, with no forced flush in between (issue 23, 4d).
TEST_F(ExportReplayTest, AProfileInsideOnePhaseCostsOnlyItsStep) {
  replay_and_compare(FATHOM_TEST_TRACES "/nsys_mfu_2gpu_after.sqlite", {.profile_step = 20});
}

}  // namespace
}  // namespace fathom
