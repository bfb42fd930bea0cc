// fathom._C: the Python front end of the same engine the C++ scopes drive.
//
// Python's `with` hands the scope its exception in __exit__ instead of unwinding C++ frames, so
// the stack-only C++ scopes (which read std::uncaught_exceptions()) cannot be held here. These
// classes drive the session state exactly as PhaseScope, StepScope and EpochScope do
// (libtorch/src/session/session.cpp), passing Python's exception as the aborted/failed flag: the
// same records, the same NVTX ranges, the same JSON report.
#include <fathom/amp.h>
#include <fathom/error.h>
#include <fathom/options.h>
#include <fathom/report_writers.h>
#include <fathom/session.h>
#include <fathom/version.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/version.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amp/amp_extension.h"
#include "collect/clock.h"
#include "collect/nvtx.h"
#include "session/copy_record.h"
#include "session/session_state.h"

namespace py = pybind11;

namespace fathom::python {
namespace {

using detail::SessionState;

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
                     std::optional<bool> print_report) {
  Options o;
  if (report_dir) o.report_dir(*report_dir);
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
  return o;
}

enum class ScopeState { Fresh, Open, Closed };

// Owns the C++ Session. Scopes keep their Python session alive (py::keep_alive) and ask it for
// the state at every call, so a scope used after close() is a no-op, never a dangling pointer.
class PySession {
 public:
  explicit PySession(Options options) : session_(std::make_unique<Session>(std::move(options))) {}

  SessionState* state() const noexcept { return session_ ? session_->internal_state() : nullptr; }
  Session* session() const noexcept { return session_.get(); }
  bool active() const noexcept { return state() != nullptr; }
  const Options& options() const { return session_ ? session_->options() : closed_options_; }
  std::string report_path() const {
    return session_ ? session_->report_path() : closed_report_path_;
  }
  std::string report_json() const {
    return format_json_report(session_ ? session_->report() : closed_report_);
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
    closed_options_ = session_->options();
    closed_report_ = session_->report();
    closed_report_path_ = session_->report_path();
    py::gil_scoped_release release;
    session_.reset();
  }

  bool open_epoch = false;
  bool open_step = false;

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

class PyStep;

class PyPhase {
 public:
  PyPhase(PySession* owner, PyStep* step, Phase phase)
      : owner_(owner), step_(step), phase_(phase) {}
  PyPhase* enter();
  bool exit(const py::object& exc_type, const py::object&, const py::object&) {
    if (!leave(state_)) return false;
    if (SessionState* s = owner_->state())
      s->end_phase(phase_, begin_ns_, device_slot_, /*aborted=*/!exc_type.is_none());
    return false;
  }
  std::string_view name() const { return phase_name(phase_); }

 private:
  PySession* owner_;
  PyStep* step_;
  Phase phase_;
  ScopeState state_ = ScopeState::Fresh;
  std::int64_t begin_ns_ = 0;
  int device_slot_ = -1;
};

class PyStep {
 public:
  PyStep(PySession* owner, std::int64_t samples) : owner_(owner), samples_(samples) {}

  PyStep* enter() {
    if (!owner_->open_epoch)
      throw Error(
          "a step outside an epoch: write `with session.epoch() as e:` then `with e.step(n) as "
          "step:`");
    if (owner_->open_step)
      throw Error("a step inside a step: leave the previous `with e.step()` block first");
    enter_once(state_, "step");
    owner_->open_step = true;
    if (SessionState* s = owner_->state()) {
      s->begin_step();
      begin_ns_ = now_ns();
    }
    return this;
  }
  bool exit(const py::object& exc_type, const py::object&, const py::object&) {
    if (!leave(state_)) return false;
    owner_->open_step = false;
    if (SessionState* s = owner_->state())
      s->end_step(begin_ns_, samples_, /*failed=*/!exc_type.is_none());
    return false;
  }
  bool is_open() const noexcept { return state_ == ScopeState::Open; }

  PyPhase phase(Phase p) { return PyPhase(owner_, this, p); }

  // As StepScope::loss: Auto mode's mixed-precision policy watches the loss it is given.
  void loss(const at::Tensor& loss) {
    if (!is_open())
      throw Error("step.loss() outside its step: call it inside `with e.step(n) as step:`");
    if (SessionState* s = owner_->state())
      if (auto* amp = s->extension<detail::AmpExtension>()) amp->loss(loss);
  }

  // As StepScope::to_device: t.to(device, non_blocking) inside a copy phase, with its record.
  at::Tensor to_device(const at::Tensor& t, c10::Device device, bool non_blocking) {
    if (!is_open())
      throw Error("step.to_device() outside its step: call it inside `with e.step(n) as step:`");
    SessionState* s = owner_->state();
    if (!s) return t.to(device, non_blocking);
    PyPhase copy(owner_, this, Phase::Copy);
    copy.enter();
    std::int64_t begin = 0, end = 0;
    at::Tensor out;
    try {
      py::gil_scoped_release release;
      begin = now_ns();
      out = t.to(device, non_blocking);
      end = now_ns();
    } catch (...) {
      copy.exit(py::bool_(true), py::none(), py::none());
      throw;
    }
    copy.exit(py::none(), py::none(), py::none());
    if (auto r = detail::copy_record_of(t, out, non_blocking, begin, end, s->step_index()))
      s->add_copy(*r);
    return out;
  }

 private:
  PySession* owner_;
  std::int64_t samples_;
  ScopeState state_ = ScopeState::Fresh;
  std::int64_t begin_ns_ = 0;
};

PyPhase* PyPhase::enter() {
  if (!step_->is_open())
    throw Error(std::string(phase_name(phase_)) +
                "() phase outside its step: enter it inside `with e.step(n) as step:`");
  enter_once(state_, "phase");
  if (SessionState* s = owner_->state()) {
    device_slot_ = s->begin_phase(phase_);
    begin_ns_ = now_ns();
  }
  return this;
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
    if (SessionState* s = owner_->state()) s->begin_epoch();
    return this;
  }
  bool exit(const py::object& exc_type, const py::object&, const py::object&) {
    if (!leave(state_)) return false;
    owner_->open_epoch = false;
    if (SessionState* s = owner_->state()) {
      const bool by_exception = !exc_type.is_none();
      py::gil_scoped_release release;  // waits for device events and writes the report
      s->end_epoch(by_exception);
    }
    return false;
  }
  PyStep step(std::int64_t samples) { return PyStep(owner_, samples); }

 private:
  PySession* owner_;
  ScopeState state_ = ScopeState::Fresh;
};

// A module's NVTX range, opened by a forward pre-hook and closed by a forward hook registered with
// always_call=True (so an exception in forward still closes it). A per-thread stack remembers
// whether each enter pushed, so a session that ends between the two hooks cannot unbalance it.
class ModuleRange {
 public:
  explicit ModuleRange(const std::string& label)
      : label_(label), name_(nvtx::register_name(label)) {}
  void enter() noexcept {
    SessionState* s = SessionState::active.load(std::memory_order_relaxed);
    const bool push = s && s->module_ranges();
    if (push) nvtx::push(nvtx::Kind::Module, name_);
    pushed().push_back(push);
  }
  void exit() noexcept {
    auto& stack = pushed();
    if (stack.empty()) return;
    const bool was_pushed = stack.back();
    stack.pop_back();
    if (was_pushed) nvtx::pop();
  }
  const std::string& label() const noexcept { return label_; }

 private:
  static std::vector<char>& pushed() {
    thread_local std::vector<char> stack;
    return stack;
  }
  std::string label_;
  nvtx::Name name_;
};

// Python loops step their own optimizers, so fathom cannot scale an fp16 loss for them: Auto mode
// then stays in bf16 or fp32 (the AMP extension refuses fp16 without step.scaled/apply), and an
// fp16 loop brings torch.amp.GradScaler.
void configure_session_amp(PySession& s, const std::string& when, std::optional<std::string> dtype,
                           std::optional<int> warmup_steps, std::optional<int> watch_steps,
                           std::optional<double> tolerance,
                           std::optional<bool> rollback_if_slower) {
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

  py::class_<PyPhase>(m, "Phase")
      .def("__enter__", &PyPhase::enter, py::return_value_policy::reference)
      .def("__exit__", &PyPhase::exit)
      .def_property_readonly("name", &PyPhase::name);

  py::class_<PyStep>(m, "Step")
      .def("__enter__", &PyStep::enter, py::return_value_policy::reference)
      .def("__exit__", &PyStep::exit)
      .def(
          "data", [](PyStep& s) { return s.phase(Phase::Data); }, py::keep_alive<0, 1>())
      .def(
          "copy", [](PyStep& s) { return s.phase(Phase::Copy); }, py::keep_alive<0, 1>())
      .def(
          "forward", [](PyStep& s) { return s.phase(Phase::Forward); }, py::keep_alive<0, 1>())
      .def(
          "backward", [](PyStep& s) { return s.phase(Phase::Backward); }, py::keep_alive<0, 1>())
      .def(
          "optimizer", [](PyStep& s) { return s.phase(Phase::Optimizer); }, py::keep_alive<0, 1>())
      .def(
          "phase",
          [](PyStep& s, const std::string& name) {
            auto p = phase_from_name(name);
            if (!p)
              throw Error("phase '" + name +
                          "' is not one of: data, copy, forward, backward, optimizer");
            return s.phase(*p);
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
      .def("step", &PyEpoch::step, py::arg("samples") = 0, py::keep_alive<0, 1>(),
           "a step of this epoch; samples: the batch size, for throughput");

  py::class_<PySession>(m, "Session")
      .def(py::init([](std::optional<std::string> report_dir, std::optional<std::string> run_name,
                       std::optional<std::string> mode, std::optional<std::string> nvtx,
                       std::optional<bool> record_shapes, std::optional<bool> cupti,
                       std::optional<bool> print_report) {
             return std::make_unique<PySession>(make_options(report_dir, run_name, mode, nvtx,
                                                             record_shapes, cupti, print_report));
           }),
           py::arg("report_dir") = py::none(), py::arg("run_name") = py::none(),
           py::arg("mode") = py::none(), py::arg("nvtx") = py::none(),
           py::arg("record_shapes") = py::none(), py::arg("cupti") = py::none(),
           py::arg("print_report") = py::none())
      .def(
          "epoch", [](PySession& s) { return PyEpoch(&s); }, py::keep_alive<0, 1>())
      .def("close", &PySession::close)
      .def("configure_amp", &configure_session_amp, py::arg("when") = "mode",
           py::arg("dtype") = py::none(), py::arg("warmup_steps") = py::none(),
           py::arg("watch_steps") = py::none(), py::arg("tolerance") = py::none(),
           py::arg("rollback_if_slower") = py::none())
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
      .def("terminal_report", &PySession::terminal_report, py::arg("epoch") = -1);

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
