#pragma once
// A second CUPTI client that behaves as the Kineto inside torch 2.11 does (pytorch/kineto
// libkineto/src, Feb 2026): at its first profile it subscribes (cuptiSubscribe, held for the
// rest of the process; a failure makes it CPU-only for good), then each trace registers its own
// buffer callbacks and a timestamp callback that returns TSC-like ticks, enables its activity
// kinds (RUNTIME and DRIVER whole, less a few noisy cbids), pushes CUSTOM0 ids around its ops,
// clears what warm-up collected when the trace starts, and at the stop forces a flush and
// disables its kinds. Like Kineto it keeps a buffer it did not allocate but cannot free ("unknown
// buffer"); unlike Kineto it counts what it saw, so tests can say whether the user's trace had
// its GPU events.
#include <cupti.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "standin.h"

namespace fathom::testing {

class KinetoLookalike {
 public:
  explicit KinetoLookalike(standin::Control& cupti);
  ~KinetoLookalike();
  KinetoLookalike(const KinetoLookalike&) = delete;
  KinetoLookalike& operator=(const KinetoLookalike&) = delete;

  // libkineto_init: subscribes. False: CUPTI was held, and this client is CPU-only for good.
  bool init();
  bool cpu_only() const { return cpu_only_; }
  // prepareTrace (a schedule's warm-up): callbacks, timestamp source, kinds. cuda_activities:
  // false is torch.profiler's activities=[CPU] on a CUDA machine, where Kineto still registers
  // its callbacks and timestamp source but enables only what its CPU types need (kCpuTypes in
  // torch/csrc/profiler/kineto_shim.cpp: EXTERNAL_CORRELATION, CUDA_RUNTIME, CUDA_DRIVER).
  void prepare(bool tsc_timestamps = true, bool cuda_activities = true);
  // startTrace: throws away what warm-up collected.
  void start();
  // stopTrace: forced flush, kinds off; then reads its buffers.
  void stop();
  // What torch.profiler's isActive() answers: from prepare() to the end of stop().
  bool active() const { return active_; }
  // Whether the profile prepared last records GPU work (kernels, copies, memsets).
  bool records_gpu() const { return cuda_activities_; }
  // Declines CUPTI's buffer requests from now on (out of memory): CUPTI drops those records and
  // counts them per queue, for this client to read.
  static void decline_requests(bool on);
  void push_op(std::uint64_t id);
  void pop_op();

  struct Seen {
    int kernels = 0;
    int kernels_linked_to_its_ops = 0;  // through a CUSTOM0 id it pushed
    int memcpys = 0;
    int runtime = 0, driver = 0;
    int unexpected_kind = 0;      // records of kinds it did not enable
    int foreign_correlation = 0;  // external ids of kinds it does not know (not CUSTOM0/1)
    int unknown_buffers = 0;      // buffers handed to it that it did not allocate
    int invalid_records = 0;      // cuptiActivityGetNextRecord errors other than the end
    std::vector<std::uint64_t> kernel_starts, kernel_ends;  // raw CUPTI timestamps
  };
  const Seen& seen() const { return seen_; }

  // Its timestamp callback: ticks at 2.5 per nanosecond from an arbitrary origin, as a TSC is.
  static std::uint64_t CUPTIAPI tsc();

 private:
  static void CUPTIAPI on_request(std::uint8_t** buffer, std::size_t* size, std::size_t* max);
  static void CUPTIAPI on_complete(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                                   std::size_t valid);
  void read(std::uint8_t* buffer, std::size_t valid);

  standin::Control& cupti_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool cpu_only_ = false;
  bool active_ = false;
  bool cuda_activities_ = true;
  std::set<CUpti_ActivityKind> kinds_;
  std::set<std::uint8_t*> allocated_;
  std::vector<std::pair<std::uint8_t*, std::size_t>> ready_;
  std::set<std::uint64_t> pushed_;
  std::map<std::uint32_t, std::uint64_t> ops_;  // correlation id -> CUSTOM0 id
  std::vector<std::uint32_t> kernel_correlations_;
  Seen seen_;
};

}  // namespace fathom::testing
