#pragma once
// The LibTorch side of fathom: a Session and the RAII scopes that mark a training loop.
//
//   fathom::Session session(fathom::Options().report_dir("reports"));
//   session.watch(*model);
//   for (int epoch = 0; epoch < epochs; ++epoch) {
//     auto e = session.epoch();                 // its report line appended when e ends
//     for (auto& batch : *loader) {
//       auto step = e.step(batch.data.size(0));
//       auto x = step.to_device(batch.data, device);
//       torch::Tensor loss;
//       auto y = step.to_device(batch.target, device);
//       { auto f = step.forward(); loss = criterion(fathom::forward(model, x), y); }
//       { auto b = step.backward(); loss.backward(); }
//       { auto o = step.optimizer(); optimizer.step(); }
//     }
//   }
//
// Scopes live on the stack only: they cannot be copied, moved or heap-allocated, and their
// constructors and destructors never throw, so an exception in the body still closes every
// range and keeps what was measured. Phases follow each other: give each its braces. A phase
// opened while another is open is said in a warning with that fix (and the report lists
// "separate phase times" as not measured), since its time is then counted in both.
//
// Misuse never crashes and never drops an epoch silently: an epoch opened inside an open epoch,
// or a step inside an open step, is ignored with a warning (its steps, or its phases, count in
// the open one); a scope that outlives its Session (a unique_ptr<Session> reset inside the loop)
// ends as a no-op, said in a warning when the Session ends. A Session may end on another thread
// than its loop's: the loop's scopes are no-ops from then on. Ending it while another thread is
// inside a scope's constructor or destructor is a data race, as for any C++ object (the scopes
// hold no lock for their whole call, which would cost every scope): stop or join the loop first.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <fathom/options.h>
#include <fathom/phase.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace fathom {

struct RunReport;  // <fathom/report.h>: the report model, for the few who read it in the loop

namespace detail {
class SessionState;
class SessionAccess;  // fathom's own code reaches the state through it (hooks/src)
class TimelineSink;
}  // namespace detail

#define FATHOM_STACK_ONLY(Type)                    \
  Type(const Type&) = delete;                      \
  Type(Type&&) = delete;                           \
  Type& operator=(const Type&) = delete;           \
  Type& operator=(Type&&) = delete;                \
  static void* operator new(std::size_t) = delete; \
  static void* operator new[](std::size_t) = delete

// One phase of a step (data, copy, forward, backward, optimizer).
class [[nodiscard]] PhaseScope {
 public:
  ~PhaseScope();
  FATHOM_STACK_ONLY(PhaseScope);

  // Counts the phase as aborted when it ends even if no exception leaves it: for an error the
  // body caught, or a binding whose scopes learn of the error by a call (Python's __exit__).
  void fail() noexcept { failed_ = true; }

 private:
  friend class StepScope;
  PhaseScope(detail::SessionState* state, Phase phase) noexcept;
  detail::SessionState* state_;  // null when fathom is off, or once its Session ended
  Phase phase_;
  std::int64_t begin_ns_ = 0;
  int exceptions_at_begin_ = 0;
  int device_slot_ = -1;
  bool failed_ = false;
};

// One training step. Ends (and is counted) when it leaves scope, also by an exception.
class [[nodiscard]] StepScope {
 public:
  ~StepScope();
  FATHOM_STACK_ONLY(StepScope);

  PhaseScope data() noexcept { return phase(Phase::Data); }
  PhaseScope copy() noexcept { return phase(Phase::Copy); }
  PhaseScope forward() noexcept { return phase(Phase::Forward); }
  PhaseScope backward() noexcept { return phase(Phase::Backward); }
  PhaseScope optimizer() noexcept { return phase(Phase::Optimizer); }
  PhaseScope phase(Phase p) noexcept { return PhaseScope(state_, p); }

  // Copies t to device inside a copy phase and records the bytes, the time, and whether the
  // source was pinned or pageable. Behaves exactly like t.to(device, non_blocking).
  at::Tensor to_device(const at::Tensor& t, c10::Device device, bool non_blocking = false);

  // Mixed precision (fathom/amp.h). scaled: the loss to call backward() on, multiplied by the
  // GradScaler's scale when this step runs fp16, else loss itself; it also tells fathom the
  // loss, as loss() does (Auto mode watches it). apply: optimizer.step(), on unscaled gradients
  // and skipped when they hold inf or NaN under mixed precision; returns whether it stepped.
  // unscale: unscales the gradients now, to clip them before apply (once per step).
  at::Tensor scaled(const at::Tensor& loss);
  void loss(const at::Tensor& loss);
  bool apply(torch::optim::Optimizer& optimizer);
  void unscale(torch::optim::Optimizer& optimizer);

  // Counts the step as failed when it ends even if no exception leaves it (see PhaseScope::fail).
  void fail() noexcept { failed_ = true; }

 private:
  friend class EpochScope;
  friend class detail::SessionAccess;
  StepScope(detail::SessionState* state, std::int64_t samples) noexcept;
  detail::SessionState* state_;
  std::int64_t begin_ns_ = 0;
  std::int64_t samples_ = 0;
  int exceptions_at_begin_ = 0;
  bool failed_ = false;
  bool opened_ = false;  // began a step (false: inside another step, or fathom off)
};

// One epoch. Its end appends the epoch to the report (also when an exception ends it), without
// waiting for the disk; an exception's end waits until the line is on disk.
class [[nodiscard]] EpochScope {
 public:
  ~EpochScope();
  FATHOM_STACK_ONLY(EpochScope);

  // samples: the batch size, for throughput. Throws fathom::Error when it is negative or above
  // kMaxStepSamples (fathom/records.h).
  StepScope step(std::int64_t samples = 0);

  // Counts the epoch as ended by an exception even if none leaves it (see PhaseScope::fail).
  void fail() noexcept { failed_ = true; }

 private:
  friend class Session;
  friend class detail::SessionAccess;
  explicit EpochScope(detail::SessionState* state) noexcept;
  detail::SessionState* state_;
  int exceptions_at_begin_ = 0;
  bool failed_ = false;
  bool opened_ = false;  // began an epoch (false: inside another epoch, or fathom off)
};

// A module's range, for blocks the user calls by hand (ModuleList items, custom blocks).
// Inside a watched model the module's qualified name is used.
class [[nodiscard]] ModuleScope {
 public:
  explicit ModuleScope(const torch::nn::Module& module) noexcept;
  explicit ModuleScope(std::string_view name) noexcept;
  ~ModuleScope();
  FATHOM_STACK_ONLY(ModuleScope);

 private:
  bool pushed_ = false;
  detail::TimelineSink* traced_ = nullptr;  // the trace file's range, ended with this scope
  detail::SessionState* state_ = nullptr;   // traced_'s owner; null once it ended
};

#undef FATHOM_STACK_ONLY

class Session {
 public:
  // Applies FATHOM_* variables over options (they win), creates and checks the report folder.
  // Throws fathom::Error on a bad variable or an unwritable folder: fail at start, not at the
  // end of the first epoch.
  explicit Session(Options options = Options());
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Learns the model's module tree: names for module ranges (see ModuleScope, forward()), and its
  // parameters and gradients for the report's memory footprint. Watch every model the loop
  // trains: the footprint adds them up and keeps each one's share (MemoryFootprint::models).
  void watch(const torch::nn::Module& model);
  // Learns an optimizer: its state's bytes go into the footprint, each parameter's to the watched
  // model that holds it. Watch every optimizer; one watched twice counts once.
  void watch(const torch::optim::Optimizer& optimizer);
  // A model that is no torch::nn::Module (a Python nn.Module): its parameters and gradients go
  // into the footprint under `name`; `key` tells it apart (the same key again replaces it).
  void watch_parameters(const void* key, const std::string& name,
                        const std::vector<at::Tensor>& parameters);

  EpochScope epoch() noexcept;

  bool active() const noexcept;
  const Options& options() const noexcept;
  // The report so far, its memory flat in the run's length: the last ended epochs in full (16,
  // more while the background writer catches up). The earlier ones are in the journal on disk:
  // fathom::read_report_file(report_path()) reads them (after flush_report()), but for any the
  // writer's full queue left out, said in a warning; the document written at the session's end
  // holds the whole run, those too.
  const RunReport& report() const noexcept;
  // Where the JSON report is written (empty when fathom is off): the whole run as one document
  // when the session ends. While it runs, each ended epoch is appended as one line to the journal
  // `<report_path>l` by a background thread; fathom::read_report_file reads either.
  std::string report_path() const;
  // Waits until every ended epoch is in the journal on disk; the epoch's end itself never waits.
  void flush_report() noexcept;

 private:
  friend class detail::SessionAccess;
  std::unique_ptr<detail::SessionState> state_;  // null when fathom is off
  Options off_options_;
};

}  // namespace fathom
