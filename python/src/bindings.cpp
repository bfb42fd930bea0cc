// fathom._C: the Python front end of the same engine the C++ scopes drive.
//
// The Python scopes hold fathom's own public scopes (fathom/session.h): the same code opens and
// ends every epoch, step and phase, with the same records, NVTX ranges and JSON report. Python's
// `with` hands the scope its exception in __exit__ instead of unwinding C++ frames, so __exit__
// tells the scope with fail() before ending it. Only the public API is used here.
#include <fathom/amp.h>
#include <fathom/error.h>
#include <fathom/options.h>
#include <fathom/report.h>
#include <fathom/report_writers.h>
#include <fathom/session.h>
#include <fathom/version.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/version.h>

#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace fathom::python {
namespace {

template <typename T>
T parse_name(const std::string& value, const char* what, std::string_view (*name_of)(T) noexcept,
             std::initializer_list<T> all) {
  std::string accepted;
  for (T v : all) {
    if (name_of(v) == value) return v;
    accepted += (accepted.empty() ? "" : ", ") + std::string(name_of(v));
  }
  throw Error(std::string(what) + "='" + value + "' is not one of: " + accepted);
}

Options make_options(std::optional<std::string> report_dir, std::optional<std::string> run_name,
                     std::optional<std::string> mode, std::optional<std::string> nvtx,
                     std::optional<bool> record_shapes, std::optional<bool> cupti,
                     std::optional<bool> print_report, std::optional<bool> count_flops,
                     std::optional<std::string> trace_file, std::optional<std::string> progress,
                     std::optional<std::string> print) {
  Options o;
  // The fixes in the report are written for this loop's language.
  o.loop_language(LoopLanguage::Python);
  if (report_dir) o.report_dir(*report_dir);
  // Options::run_name("") means the default name; here None does, and "" is a mistake.
  if (run_name && run_name->empty())
    throw Error("run_name='' is empty; give a name, or None for the default (fathom-<date>-...)");
  if (run_name) o.run_name(*run_name);
  if (mode)
    o.mode(parse_name<Mode>(*mode, "mode", &mode_name,
                            {Mode::Off, Mode::Observe, Mode::Suggest, Mode::Auto}));
  if (nvtx)
    o.nvtx(parse_name<NvtxLevel>(
        *nvtx, "nvtx", &nvtx_level_name,
        {NvtxLevel::Off, NvtxLevel::Phases, NvtxLevel::Modules, NvtxLevel::Ops}));
  if (record_shapes) o.record_shapes(*record_shapes);
  if (cupti) o.cupti(*cupti);
  if (print_report) o.print_report(*print_report);
  if (count_flops) o.count_flops(*count_flops);
  if (trace_file) o.trace_file(*trace_file);
  if (progress)
    o.progress(parse_name<Progress>(*progress, "progress", &progress_name,
                                    {Progress::Auto, Progress::On, Progress::Off}));
  if (print)
    o.print(
        parse_name<Print>(*print, "print", &print_name, {Print::Summary, Print::Full, Print::Off}));
  return o;
}

enum class ScopeState { Fresh, Open, Closed };

// One of fathom's scopes, held by a Python object from __enter__ to __exit__. The C++ scopes are
// stack-only so that C++ ends them in order; here the Python classes below check the order
// instead, and the scope is built in place from the prvalue fathom returns (no copy, no move).
template <typename Scope>
class Held {
 public:
  Held() = default;
  ~Held() { close(/*failed=*/false); }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;

  template <typename Make>
  void open(Make&& make) {
    ::new (static_cast<void*>(bytes_)) Scope(make());
    open_ = true;
  }
  Scope* get() noexcept { return open_ ? std::launder(reinterpret_cast<Scope*>(bytes_)) : nullptr; }
  void close(bool failed) noexcept {
    Scope* scope = get();
    if (!scope) return;
    if constexpr (requires { scope->fail(); }) {
      if (failed) scope->fail();
    }
    open_ = false;
    scope->~Scope();
  }

 private:
  alignas(Scope) unsigned char bytes_[sizeof(Scope)];
  bool open_ = false;
};

// Owns the C++ Session. Scopes keep their Python session alive (py::keep_alive); close() refuses
// while one holds a C++ scope, and scopes opened after it hold none: a scope used after close()
// is a no-op, never a dangling pointer.
class PySession {
 public:
  explicit PySession(Options options) : session_(std::make_unique<Session>(std::move(options))) {}

  Session* session() const noexcept { return session_.get(); }
  bool active() const noexcept { return session_ && session_->active(); }
  const Options& options() const { return session_ ? session_->options() : closed_options_; }
  std::string report_path() const {
    return session_ ? session_->report_path() : closed_report_path_;
  }
  // The whole run as the JSON document. The session keeps its last epochs in memory; the earlier
  // ones are read back from its report on disk (the journal while it runs).
  std::string report_json() const {
    const RunReport& r = run_report();
    if (r.epochs.empty() || r.epochs.front().index == 0) return format_json_report(r);
    RunReport whole = epochs_on_disk(-1);
    for (const EpochSummary& e : r.epochs) whole.epochs.push_back(e);
    whole.environment = r.environment;
    return format_json_report(whole);
  }
  // The run without its epochs, and its ended epochs, as JSON: Python's Session.report reads
  // each epoch once instead of the whole run at every read (issue 24).
  std::string report_head_json() const {
    const RunReport& r = run_report();
    RunReport head;
    head.schema_version = r.schema_version;
    head.run_name = r.run_name;
    head.environment = r.environment;
    return format_json_report(head);
  }
  // The last ended epoch's journal line; "" before the first.
  std::string last_epoch_json() const {
    const RunReport& r = run_report();
    return r.epochs.empty() ? std::string() : format_journal_epoch(r.epochs.back(), r.environment);
  }
  // The ended epochs whose index is above `after`, in order, each as its journal line: those still
  // in memory from there, any earlier ones from one read of the report on disk.
  std::vector<std::string> epoch_jsons_after(std::int64_t after) const {
    const RunReport& r = run_report();
    std::vector<std::string> out;
    if (r.epochs.empty()) return out;
    if (r.epochs.front().index > after + 1) {
      // Epochs between may have left memory (or never were: an epoch ended by an exception
      // before its first step has no report). The report on disk says which.
      for (const EpochSummary& e : epochs_on_disk(after).epochs)
        out.push_back(format_journal_epoch(e, r.environment));
    }
    for (const EpochSummary& e : r.epochs)
      if (e.index > after) out.push_back(format_journal_epoch(e, r.environment));
    return out;
  }
  std::string terminal_report(int epoch) const {
    const RunReport& r = session_ ? session_->report() : closed_report_;
    return r.epochs.empty() ? std::string() : format_terminal_report(r, epoch);
  }

  // Ends the session: its op callbacks and extensions go; the report stays readable.
  void close() {
    if (!session_) return;
    if (open_epoch)
      throw Error("close() inside an open epoch: leave the `with session.epoch()` block first");
    if (open_step || open_phases > 0)
      throw Error("close() inside an open step or phase: leave its `with` block first");
    closed_options_ = session_->options();
    closed_report_ = session_->report();
    closed_report_path_ = session_->report_path();
    py::gil_scoped_release release;
    session_.reset();
  }

  const RunReport& run_report() const { return session_ ? session_->report() : closed_report_; }
  // The epochs above `after` that the session no longer holds in memory, from its journal (or,
  // once it ended, its document).
  RunReport epochs_on_disk(std::int64_t after) const {
    if (session_) session_->flush_report();
    RunReport disk = read_report_file(report_path());
    const std::int64_t held = run_report().epochs.front().index;
    std::erase_if(disk.epochs,
                  [&](const EpochSummary& e) { return e.index <= after || e.index >= held; });
    return disk;
  }

  bool open_epoch = false;
  bool open_step = false;
  int open_phases = 0;
  Phase open_phase = Phase::Forward;  // the innermost open phase, when open_phases > 0

 private:
  std::unique_ptr<Session> session_;
  Options closed_options_;
  RunReport closed_report_;
  std::string closed_report_path_;
};

void enter_once(ScopeState& s, const char* what) {
  if (s != ScopeState::Fresh)
    throw Error(std::string(what) +
                " scope entered twice: each scope is entered once; ask for a new one");
  s = ScopeState::Open;
}

bool leave(ScopeState& s) {
  if (s != ScopeState::Open) return false;
  s = ScopeState::Closed;
  return true;
}

class PyEpoch {
 public:
  explicit PyEpoch(PySession* owner) : owner_(owner) {}
  PyEpoch* enter() {
    if (owner_->open_epoch)
      throw Error(
          "an epoch inside an epoch: leave the previous `with session.epoch()` block first");
    enter_once(state_, "epoch");
    owner_->open_epoch = true;
    if (Session* s = owner_->session()) {
      scope_ = std::make_unique<Held<EpochScope>>();
      scope_->open([&] { return s->epoch(); });
    }
    return this;
  }
  bool exit(const py::object& exc_type, const py::object&, const py::object&) {
    if (!leave(state_)) return false;
    owner_->open_epoch = false;
    if (scope_) {
      py::gil_scoped_release release;  // waits for device events and writes the report
      scope_->close(/*failed=*/!exc_type.is_none());
    }
    return false;
  }
  EpochScope* scope() noexcept { return scope_ ? scope_->get() : nullptr; }
  PySession* owner() const noexcept { return owner_; }

 private:
  PySession* owner_;
  ScopeState state_ = ScopeState::Fresh;
  std::unique_ptr<Held<EpochScope>> scope_;  // while open, in a session not closed
};

class PyStep {
 public:
  PyStep(PyEpoch* epoch, std::int64_t samples)
      : owner_(epoch->owner()), epoch_(epoch), samples_(samples) {}

  PyStep* enter() {
    if (!owner_->open_epoch)
      throw Error(
          "a step outside an epoch: write `with session.epoch() as e:` then `with e.step(n) as "
          "step:`");
    if (owner_->open_step)
      throw Error("a step inside a step: leave the previous `with e.step()` block first");
    enter_once(state_, "step");
    owner_->open_step = true;
    if (EpochScope* e = epoch_->scope()) {
      scope_ = std::make_unique<Held<StepScope>>();
      scope_->open([&] { return e->step(samples_); });
    }
    return this;
  }
  bool exit(const py::object& exc_type, const py::object&, const py::object&) {
    if (!leave(state_)) return false;
    owner_->open_step = false;
    if (scope_) scope_->close(/*failed=*/!exc_type.is_none());
    return false;
  }
  bool is_open() const noexcept { return state_ == ScopeState::Open; }
  StepScope* scope() noexcept { return scope_ ? scope_->get() : nullptr; }
  PySession* owner() const noexcept { return owner_; }

  // StepScope::loss: Auto mode's mixed-precision policy watches the loss it is given.
  void loss(const at::Tensor& loss) {
    if (!is_open())
      throw Error("step.loss() outside its step: call it inside `with e.step(n) as step:`");
    if (StepScope* s = scope()) s->loss(loss);
  }

  // StepScope::to_device: t.to(device, non_blocking) inside a copy phase, with its record.
  at::Tensor to_device(const at::Tensor& t, c10::Device device, bool non_blocking) {
    if (!is_open())
      throw Error("step.to_device() outside its step: call it inside `with e.step(n) as step:`");
    StepScope* s = scope();
    if (!s) return t.to(device, non_blocking);
    py::gil_scoped_release release;
    return s->to_device(t, device, non_blocking);
  }

 private:
  PySession* owner_;
  PyEpoch* epoch_;  // kept alive by py::keep_alive
  std::int64_t samples_;
  ScopeState state_ = ScopeState::Fresh;
  std::unique_ptr<Held<StepScope>> scope_;
};

class PyPhase {
 public:
  PyPhase(PyStep* step, Phase phase) : step_(step), phase_(phase) {}
  PyPhase* enter() {
    if (!step_->is_open())
      throw Error(std::string(phase_name(phase_)) +
                  "() phase outside its step: enter it inside `with e.step(n) as step:`");
    if (step_->owner()->open_phases > 0) {
      // Each phase's time is its own: one inside another would be counted twice.
      const std::string open(phase_name(step_->owner()->open_phase));
      throw Error(std::string(phase_name(phase_)) + "() phase inside the open " + open +
                  "() phase: leave the `with step." + open +
                  "():` block first (phases follow "
                  "each other, they do not nest)");
    }
    enter_once(state_, "phase");
    if (StepScope* s = step_->scope()) {
      scope_ = std::make_unique<Held<PhaseScope>>();
      scope_->open([&] { return s->phase(phase_); });
      ++step_->owner()->open_phases;
      step_->owner()->open_phase = phase_;
    }
    return this;
  }
  bool exit(const py::object& exc_type, const py::object&, const py::object&) {
    if (!leave(state_)) return false;
    if (scope_) {
      scope_->close(/*failed=*/!exc_type.is_none());
      scope_.reset();
      --step_->owner()->open_phases;
    }
    return false;
  }
  std::string_view name() const { return phase_name(phase_); }

 private:
  PyStep* step_;  // kept alive by py::keep_alive
  Phase phase_;
  ScopeState state_ = ScopeState::Fresh;
  std::unique_ptr<Held<PhaseScope>> scope_;
};

// A module's NVTX range, opened by a forward pre-hook and closed by a forward hook registered with
// always_call=True (so an exception in forward still closes it): a fathom::ModuleScope, held on a
// per-thread stack between the two hooks. The scope decides whether to push (a session with
// module ranges has an epoch or step open on this thread) and remembers it, so a session that
// ends between the two hooks cannot unbalance the ranges.
class ModuleRange {
 public:
  explicit ModuleRange(const std::string& label) : label_(label) {}
  void enter() {
    auto range = std::make_unique<Held<ModuleScope>>();
    range->open([&] { return ModuleScope(std::string_view(label_)); });
    open().push_back(std::move(range));
  }
  void exit() noexcept {
    auto& stack = open();
    if (!stack.empty()) stack.pop_back();
  }
  const std::string& label() const noexcept { return label_; }

 private:
  static std::vector<std::unique_ptr<Held<ModuleScope>>>& open() {
    thread_local std::vector<std::unique_ptr<Held<ModuleScope>>> stack;
    return stack;
  }
  std::string label_;
};

// Python loops step their own optimizers, so fathom cannot scale an fp16 loss for them: Auto mode
// then stays in bf16 or fp32 (the AMP extension refuses fp16 without step.scaled/apply), and an
// fp16 loop brings torch.amp.GradScaler.
void configure_session_amp(PySession& s, const std::string& when, std::optional<std::string> dtype,
                           std::optional<int> warmup_steps, std::optional<int> watch_steps,
                           std::optional<double> tolerance, std::optional<bool> rollback_if_slower,
                           std::optional<bool> native_only) {
  AmpOptions o;
  if (when == "mode")
    o.when(AmpOptions::When::Mode);
  else if (when == "always")
    o.when(AmpOptions::When::Always);
  else if (when == "never")
    o.when(AmpOptions::When::Never);
  else
    throw Error("when='" + when + "' is not one of: mode, always, never");
  if (dtype) {
    if (*dtype == "bf16" || *dtype == "bfloat16")
      o.dtype(c10::ScalarType::BFloat16);
    else if (*dtype == "fp16" || *dtype == "float16")
      o.dtype(c10::ScalarType::Half);
    else
      throw Error("dtype='" + *dtype +
                  "' is not one of: bf16, fp16 (None: bf16 where the device has it)");
  }
  if (warmup_steps) o.warmup_steps(*warmup_steps);
  if (watch_steps) o.watch_steps(*watch_steps);
  if (tolerance) o.tolerance(*tolerance);
  if (rollback_if_slower) o.rollback_if_slower(*rollback_if_slower);
  if (native_only) o.native_only(*native_only);
  if (s.open_epoch)
    throw Error("configure_amp() inside an epoch: call it before `with session.epoch()`");
  if (Session* session = s.session()) configure_amp(*session, o);
}

c10::Device to_torch_device(const py::handle& device) {
  if (THPDevice_Check(device.ptr())) return reinterpret_cast<THPDevice*>(device.ptr())->device;
  return py::module_::import("torch").attr("device")(device).cast<c10::Device>();
}

}  // namespace
}  // namespace fathom::python

PYBIND11_MODULE(_C, m) {
  using namespace fathom;
  using namespace fathom::python;
  m.doc() = "fathom's engine: session, epoch, step and phase scopes, module ranges";
  m.attr("__version__") = kVersion;
  m.attr("torch_version") = TORCH_VERSION;  // the LibTorch this module was built against
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  // A report on disk, whichever form its run left (read_report_file): as JSON text.
  m.def(
      "read_report_json",
      [](const std::string& path) { return format_json_report(read_report_file(path)); },
      py::arg("path"));

  py::class_<PyPhase>(m, "Phase")
      .def("__enter__", &PyPhase::enter, py::return_value_policy::reference)
      .def("__exit__", &PyPhase::exit)
      .def_property_readonly("name", &PyPhase::name);

  py::class_<PyStep>(m, "Step")
      .def("__enter__", &PyStep::enter, py::return_value_policy::reference)
      .def("__exit__", &PyStep::exit)
      .def(
          "data", [](PyStep& s) { return PyPhase(&s, Phase::Data); }, py::keep_alive<0, 1>())
      .def(
          "copy", [](PyStep& s) { return PyPhase(&s, Phase::Copy); }, py::keep_alive<0, 1>())
      .def(
          "forward", [](PyStep& s) { return PyPhase(&s, Phase::Forward); }, py::keep_alive<0, 1>())
      .def(
          "backward", [](PyStep& s) { return PyPhase(&s, Phase::Backward); },
          py::keep_alive<0, 1>())
      .def(
          "optimizer", [](PyStep& s) { return PyPhase(&s, Phase::Optimizer); },
          py::keep_alive<0, 1>())
      .def(
          "phase",
          [](PyStep& s, const std::string& name) {
            auto p = phase_from_name(name);
            if (!p)
              throw Error("phase '" + name +
                          "' is not one of: data, copy, forward, backward, optimizer");
            return PyPhase(&s, *p);
          },
          py::arg("name"), py::keep_alive<0, 1>())
      .def("loss", &PyStep::loss, py::arg("loss"),
           "tells fathom the step's loss (Auto mode's mixed-precision policy watches it)")
      .def(
          "to_device",
          [](PyStep& s, const at::Tensor& t, const py::handle& device, bool non_blocking) {
            return s.to_device(t, to_torch_device(device), non_blocking);
          },
          py::arg("tensor"), py::arg("device"), py::arg("non_blocking") = false,
          "t.to(device, non_blocking) inside a copy phase; records bytes, time, pinned or "
          "pageable");

  py::class_<PyEpoch>(m, "Epoch")
      .def("__enter__", &PyEpoch::enter, py::return_value_policy::reference)
      .def("__exit__", &PyEpoch::exit)
      .def(
          "step",
          [](PyEpoch& e, std::int64_t samples) {
            check_step_samples(samples);  // at the call, as EpochScope::step, also when off
            return PyStep(&e, samples);
          },
          py::arg("samples") = 0, py::keep_alive<0, 1>(),
          "a step of this epoch; samples: the batch size, for throughput");

  py::class_<PySession>(m, "Session")
      .def(py::init([](std::optional<std::string> report_dir, std::optional<std::string> run_name,
                       std::optional<std::string> mode, std::optional<std::string> nvtx,
                       std::optional<bool> record_shapes, std::optional<bool> cupti,
                       std::optional<bool> print_report, std::optional<bool> count_flops,
                       std::optional<std::string> trace_file, std::optional<std::string> progress,
                       std::optional<std::string> print) {
             return std::make_unique<PySession>(
                 make_options(report_dir, run_name, mode, nvtx, record_shapes, cupti, print_report,
                              count_flops, trace_file, progress, print));
           }),
           py::arg("report_dir") = py::none(), py::arg("run_name") = py::none(),
           py::arg("mode") = py::none(), py::arg("nvtx") = py::none(),
           py::arg("record_shapes") = py::none(), py::arg("cupti") = py::none(),
           py::arg("print_report") = py::none(), py::arg("count_flops") = py::none(),
           py::arg("trace_file") = py::none(), py::arg("progress") = py::none(),
           py::arg("print") = py::none())
      .def(
          "epoch", [](PySession& s) { return PyEpoch(&s); }, py::keep_alive<0, 1>())
      .def("close", &PySession::close)
      .def("configure_amp", &configure_session_amp, py::arg("when") = "mode",
           py::arg("dtype") = py::none(), py::arg("warmup_steps") = py::none(),
           py::arg("watch_steps") = py::none(), py::arg("tolerance") = py::none(),
           py::arg("rollback_if_slower") = py::none(), py::arg("native_only") = py::none())
      // Session.forward's region (fathom::detail::amp_region in C++): the thread's session.
      .def("amp_region_runs", [](PySession&) { fathom::detail::amp_region_runs(); })
      .def("amp_region_failed",
           [](PySession&, const std::string& what) {
             return fathom::detail::amp_region_failed(what.c_str());
           })
      .def_property_readonly("active", &PySession::active)
      .def_property_readonly(
          "mode", [](const PySession& s) { return std::string(mode_name(s.options().mode())); })
      .def_property_readonly(
          "nvtx",
          [](const PySession& s) { return std::string(nvtx_level_name(s.options().nvtx())); })
      .def_property_readonly("report_dir",
                             [](const PySession& s) { return s.options().report_dir(); })
      .def_property_readonly("report_path", &PySession::report_path)
      .def("report_json", &PySession::report_json)
      .def("report_head_json", &PySession::report_head_json)
      .def("last_epoch_json", &PySession::last_epoch_json)
      .def("epoch_jsons_after", &PySession::epoch_jsons_after, py::arg("after"))
      .def("flush_report",
           [](PySession& s) {
             py::gil_scoped_release release;  // waits for the report writer's disk
             if (Session* session = s.session()) session->flush_report();
           })
      .def("terminal_report", &PySession::terminal_report, py::arg("epoch") = -1)
      // A Python model's parameters for the footprint (key: id(model)).
      .def(
          "watch_parameters",
          [](PySession& s, std::uintptr_t key, const std::string& name,
             const std::vector<at::Tensor>& parameters) {
            if (Session* session = s.session())
              session->watch_parameters(reinterpret_cast<const void*>(key), name, parameters);
          },
          py::arg("key"), py::arg("name"), py::arg("parameters"));

  py::class_<ModuleRange>(m, "ModuleRange")
      .def(py::init<const std::string&>(), py::arg("label"))
      .def_property_readonly("label", &ModuleRange::label)
      .def(
          "__enter__",
          [](ModuleRange& r) {
            r.enter();
            return &r;
          },
          py::return_value_policy::reference)
      .def("__exit__",
           [](ModuleRange& r, const py::args&) {
             r.exit();
             return false;
           })
      // forward_pre_hook(module, args) and forward_hook(module, args, output): return None so
      // the module's inputs and outputs pass through untouched.
      .def("pre_hook", [](ModuleRange& r, const py::args&) { r.enter(); })
      .def("post_hook", [](ModuleRange& r, const py::args&) { r.exit(); });
}
