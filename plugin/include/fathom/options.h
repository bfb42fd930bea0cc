#pragma once
// Session options in LibTorch's builder style: Options().report_dir("r").mode(Mode::Suggest).
// FATHOM_* environment variables override them (see Options::with_env), so a built binary can be
// instrumented without a rebuild.
#include <fathom/memory_budget.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace fathom {

// What fathom does. Off: nothing measurable (no ranges, no report). Observe: measure and report.
// Suggest: also list the fixes. Auto: also apply the fixes fathom knows how to apply.
enum class Mode { Off, Observe, Suggest, Auto };
// How fine the NVTX ranges are; each level includes the ones before it.
enum class NvtxLevel { Off, Phases, Modules, Ops };
// The live progress line on standard error. Auto: drawn when standard error is a terminal (a
// log file or a pipe gets none).
enum class Progress { Auto, On, Off };

// What fathom prints while the run goes. Summary: a few lines at each epoch end (step time,
// throughput, the top findings, where the report is), and the full report once, when the session
// ends. Full: the full report at each epoch end. Off: nothing (the report files are written all
// the same). FATHOM_PRINT=summary|full|off.
enum class Print { Off, Summary, Full };
// The language of the training loop: the advisor writes its fixes in it. The Python bindings set
// Python; C++ programs keep the default.
enum class LoopLanguage { Cpp, Python };

// Receives each of fathom's warnings (one line, without a "fathom: " prefix). fathom says a
// warning kind at most a few times and then counts it; a handler must not block for long.
using WarningHandler = std::function<void(std::string_view message)>;
// Receives the text fathom prints (whole lines, each block ending in a newline).
using PrintHandler = std::function<void(std::string_view text)>;

std::string_view mode_name(Mode m) noexcept;
std::string_view nvtx_level_name(NvtxLevel l) noexcept;
std::string_view progress_name(Progress p) noexcept;
std::string_view print_name(Print p) noexcept;
std::string_view loop_language_name(LoopLanguage l) noexcept;
// The enum a name stands for (the names FATHOM_MODE and the report use); nullopt for any other.
std::optional<Mode> mode_from_name(std::string_view name) noexcept;
std::optional<LoopLanguage> loop_language_from_name(std::string_view name) noexcept;

class Options {
 public:
  Options() = default;

  Options& mode(Mode v) {
    mode_ = v;
    return *this;
  }
  Mode mode() const noexcept { return mode_; }

  // Folder for the JSON (and other) reports; created at session start.
  Options& report_dir(std::string v) {
    report_dir_ = std::move(v);
    return *this;
  }
  const std::string& report_dir() const noexcept { return report_dir_; }

  // Base name of the report files; empty means "fathom-<date>-<time>-<pid>".
  Options& run_name(std::string v) {
    run_name_ = std::move(v);
    return *this;
  }
  const std::string& run_name() const noexcept { return run_name_; }

  Options& nvtx(NvtxLevel v) {
    nvtx_ = v;
    return *this;
  }
  NvtxLevel nvtx() const noexcept { return nvtx_; }

  // Op ranges carry input shapes (costs a little per op; only with NvtxLevel::Ops).
  Options& record_shapes(bool v) {
    record_shapes_ = v;
    return *this;
  }
  bool record_shapes() const noexcept { return record_shapes_; }

  // Collect GPU activity through CUPTI when a GPU is present.
  Options& cupti(bool v) {
    cupti_ = v;
    return *this;
  }
  bool cupti() const noexcept { return cupti_; }

  // Measure the bytes each block saves for backward (the checkpoint planner's input). fathom sees
  // saved tensors through a hook on LibTorch's autograd engine, which it installs at the first
  // fathom::forward / fathom::block call of a profiled step; once installed it stays for the
  // process (README, "The autograd-engine hook"). Off: LibTorch's engine is left alone and the
  // report says activation bytes were not measured. FATHOM_AUTOGRAD_HOOK=on|off.
  Options& autograd_hook(bool v) {
    autograd_hook_ = v;
    return *this;
  }
  bool autograd_hook() const noexcept { return autograd_hook_; }

  // Count the floating-point operations of the ops that run, in the first steps of each epoch
  // (the report's `flops`: per step, per phase, op and type, as torch.utils.flop_counter counts
  // them). Outside those steps no op callback is registered. Off: none at all, and the report
  // says FLOPs were not counted. FATHOM_COUNT_FLOPS=on|off.
  Options& count_flops(bool v) {
    count_flops_ = v;
    return *this;
  }
  bool count_flops() const noexcept { return count_flops_; }

  // Also write every GPU activity record CUPTI delivers (kernels, copies, runtime calls, ops, the
  // phase and step annotations) to this file, JSON lines, gzip-compressed when the name ends in
  // .gz: for `fathom analyze`, and as fixtures that replay a real GPU run in CPU tests. Empty:
  // off. FATHOM_RECORD_ACTIVITY=path.
  Options& record_activity(std::string path) {
    record_activity_ = std::move(path);
    return *this;
  }
  const std::string& record_activity() const noexcept { return record_activity_; }

  // Also write a Chrome / Perfetto trace of the run to this file as it goes (Trace Event Format;
  // gzip-compressed when the name ends in .json.gz): epochs, steps, phases and modules on the
  // training thread, findings and step alarms as instant events, and on a GPU the kernels, copies
  // and memsets on their streams. Opens in ui.perfetto.dev and chrome://tracing, a killed run's
  // file too. Empty: off. FATHOM_TRACE=run.trace.json.
  Options& trace_file(std::string path) {
    trace_file_ = std::move(path);
    return *this;
  }
  const std::string& trace_file() const noexcept { return trace_file_; }

  // A live line on standard error, redrawn at most five times a second: epoch, step, samples/s,
  // step time, memory and the findings so far. FATHOM_PROGRESS=auto|on|off.
  Options& progress(Progress v) {
    progress_ = v;
    return *this;
  }
  Progress progress() const noexcept { return progress_; }

  // What to print (see Print); the default is Summary.
  Options& print(Print v) {
    print_ = v;
    return *this;
  }
  Print print() const noexcept { return print_; }
  // The older switch: true is Print::Summary, false Print::Off.
  Options& print_report(bool v) {
    print_ = v ? Print::Summary : Print::Off;
    return *this;
  }
  bool print_report() const noexcept { return print_ != Print::Off; }

  // Where the printed text goes. Unset: standard error, so that it never lands inside the
  // program's own output (a progress line on stdout, a pipe into another tool).
  Options& print_to(PrintHandler v) {
    print_to_ = std::move(v);
    return *this;
  }
  const PrintHandler& print_to() const noexcept { return print_to_; }

  // The language the fixes are written in (see LoopLanguage).
  Options& loop_language(LoopLanguage v) {
    loop_language_ = v;
    return *this;
  }
  LoopLanguage loop_language() const noexcept { return loop_language_; }

  // The memory a step may use before fathom checkpoints activations: bytes, or a fraction of the
  // device memory (on CPU, which has none, a fraction of the activation memory measured without
  // checkpointing). Unset: Auto mode acts when a step's peak passes 90 % of device memory.
  // FATHOM_CHECKPOINT_BUDGET=12GiB | 80% | 0.8.
  Options& checkpoint_budget(MemoryBudget v) {
    checkpoint_budget_ = v;
    return *this;
  }
  const std::optional<MemoryBudget>& checkpoint_budget() const noexcept {
    return checkpoint_budget_;
  }

  // Where fathom's warnings go while this session lives (a logger, a test's list). Unset: standard
  // error, each line prefixed with "fathom: ".
  Options& warnings(WarningHandler v) {
    warnings_ = std::move(v);
    return *this;
  }
  const WarningHandler& warnings() const noexcept { return warnings_; }

  // Returns these options with every FATHOM_* variable of the environment applied. Throws
  // fathom::Error naming the variable and the accepted values on a bad value or unknown name.
  Options with_env() const;

 private:
  Mode mode_ = Mode::Suggest;
  std::string report_dir_ = "fathom-reports";
  std::string run_name_;
  NvtxLevel nvtx_ = NvtxLevel::Modules;
  bool record_shapes_ = false;
  bool cupti_ = true;
  bool autograd_hook_ = true;
  bool count_flops_ = true;
  std::string record_activity_;
  std::string trace_file_;
  Progress progress_ = Progress::Auto;
  Print print_ = Print::Summary;
  PrintHandler print_to_;
  LoopLanguage loop_language_ = LoopLanguage::Cpp;
  std::optional<MemoryBudget> checkpoint_budget_;
  WarningHandler warnings_;
};

}  // namespace fathom
