#include <fathom/error.h>
#include <fathom/options.h>
#include <fathom/rank_info.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "base/run_name.h"
#include "base/terminal_text.h"
#include "base/warning_sink.h"

extern char** environ;

namespace fathom {
namespace {

template <typename T, std::size_t N>
using Choices = std::array<std::pair<std::string_view, T>, N>;

constexpr Choices<Mode, 4> kModes{{{"off", Mode::Off},
                                   {"observe", Mode::Observe},
                                   {"suggest", Mode::Suggest},
                                   {"auto", Mode::Auto}}};
constexpr Choices<NvtxLevel, 4> kNvtxLevels{{{"off", NvtxLevel::Off},
                                             {"phases", NvtxLevel::Phases},
                                             {"modules", NvtxLevel::Modules},
                                             {"ops", NvtxLevel::Ops}}};
constexpr Choices<Progress, 3> kProgress{
    {{"auto", Progress::Auto}, {"on", Progress::On}, {"off", Progress::Off}}};
// "on" is the default (older FATHOM_PRINT=on|off).
constexpr Choices<Print, 4> kPrints{{{"summary", Print::Summary},
                                     {"full", Print::Full},
                                     {"off", Print::Off},
                                     {"on", Print::Summary}}};
constexpr Choices<LoopLanguage, 2> kLanguages{
    {{"c++", LoopLanguage::Cpp}, {"python", LoopLanguage::Python}}};
constexpr Choices<bool, 8> kSwitches{{{"on", true},
                                      {"off", false},
                                      {"1", true},
                                      {"0", false},
                                      {"true", true},
                                      {"false", false},
                                      {"yes", true},
                                      {"no", false}}};

// Every variable fathom reads. A FATHOM_* name one or two edits away from one of them is an
// error (a typo must not silently leave a setting at its default); other FATHOM_* names are left
// alone with a warning, because build scripts and users name their own variables that way too.
constexpr std::array<std::string_view, 14> kKnownVariables{
    "FATHOM_MODE",          "FATHOM_REPORT_DIR",
    "FATHOM_RUN_NAME",      "FATHOM_NVTX",
    "FATHOM_RECORD_SHAPES", "FATHOM_CUPTI",
    "FATHOM_PRINT",         "FATHOM_CHECKPOINT_BUDGET",
    "FATHOM_MERGE_TIMEOUT", "FATHOM_RECORD_ACTIVITY",
    "FATHOM_AUTOGRAD_HOOK", "FATHOM_COUNT_FLOPS",
    "FATHOM_TRACE",         "FATHOM_PROGRESS"};  // FATHOM_MERGE_TIMEOUT: read by rank_info.cpp

template <typename T, std::size_t N>
std::optional<T> find_choice(std::string_view value, const Choices<T, N>& choices) noexcept {
  for (const auto& [name, v] : choices) {
    if (name == value) return v;
  }
  return std::nullopt;
}

template <typename T, std::size_t N>
T parse_choice(const char* variable, std::string_view value, const Choices<T, N>& choices) {
  if (auto v = find_choice(value, choices)) return *v;
  std::string accepted;
  for (const auto& [name, v] : choices) {
    accepted += accepted.empty() ? "" : "|";
    accepted += name;
  }
  throw Error(fmt::format("{}='{}' is not valid; accepted values: {}", variable,
                          detail::echoed_value(value), accepted));
}

template <typename T, std::size_t N>
std::string_view name_of(T v, const Choices<T, N>& choices) noexcept {
  for (const auto& [name, c] : choices) {
    if (c == v) return name;
  }
  return "?";
}

// Optimal string alignment distance (edits, counting a swap of neighbours as one).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

void check_unknown_variables() {
  std::string known;
  for (auto k : kKnownVariables) known += fmt::format("{}{}", known.empty() ? "" : ", ", k);
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    if (entry.substr(0, 7) != "FATHOM_") continue;
    std::string_view name = entry.substr(0, entry.find('='));
    if (std::find(kKnownVariables.begin(), kKnownVariables.end(), name) != kKnownVariables.end())
      continue;
    // A name holds any byte but '=' and NUL, and may be of any length: echoed cut and escaped.
    const std::string shown = detail::echoed_value(name);
    for (auto k : kKnownVariables) {
      if (edit_distance(name, k) <= 2)
        throw Error(
            fmt::format("unknown environment variable {}: did you mean {}? (fathom reads: {})",
                        shown, k, known));
    }
    // The one warning sink: a session's Options::warnings handler gets it, and the progress
    // line is drawn again below it.
    detail::warn("ignoring ", shown, ", not a variable fathom reads (", known, ")");
  }
}
// A file fathom writes as the run goes (the activity file, the trace): its folder must exist
// (fathom creates report folders, not these: a typo in one would otherwise be found at the first
// write) and its name must say the format.
void check_output_path(const std::string& path, std::string_view source, std::string_view what,
                       std::string_view suffix) {
  const auto ends_with = [&](std::string_view end) {
    return path.size() >= end.size() &&
           path.compare(path.size() - end.size(), end.size(), end) == 0;
  };
  const std::string gz = std::string(suffix) + ".gz";
  const std::string accepted =
      fmt::format("a path ending in {} or {} (gzip-compressed) in an existing folder", suffix, gz);
  if (!ends_with(suffix) && !ends_with(gz))
    throw Error(fmt::format("{}='{}' is not {} name; accepted: {}", source,
                            detail::printed_path(path), what, accepted));
  const auto slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  struct stat st;
  if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(fmt::format("{}='{}': the folder {} does not exist; accepted: {}", source,
                            detail::printed_path(path), detail::printed_path(folder), accepted));
}

// Paths reach the system as C strings: a NUL ends one early, and fathom would write to a folder
// nobody named. Only code can pass one (std::string and Python's str hold NUL; the environment
// cannot).
void check_no_nul(const std::string& path, std::string_view source) {
  if (path.find('\0') == std::string::npos) return;
  throw Error(
      fmt::format("{}='{}' holds a NUL byte, which would end the path there; give a path "
                  "without one",
                  source, detail::printed_path(path)));
}

}  // namespace

std::string_view mode_name(Mode m) noexcept { return name_of(m, kModes); }
std::string_view nvtx_level_name(NvtxLevel l) noexcept { return name_of(l, kNvtxLevels); }
std::string_view progress_name(Progress p) noexcept { return name_of(p, kProgress); }
std::string_view print_name(Print p) noexcept { return name_of(p, kPrints); }
std::string_view loop_language_name(LoopLanguage l) noexcept { return name_of(l, kLanguages); }

std::optional<Mode> mode_from_name(std::string_view name) noexcept {
  return find_choice(name, kModes);
}
std::optional<LoopLanguage> loop_language_from_name(std::string_view name) noexcept {
  return find_choice(name, kLanguages);
}

Options Options::with_env() const {
  {
    // A session reads its environment before it installs its warning handler: what is said
    // about the environment goes to that handler too.
    std::optional<detail::WarningRedirect> to_handler;
    if (warnings_) to_handler.emplace(warnings_);
    check_unknown_variables();
  }
  Options o = *this;
  auto get = [](const char* name) -> const char* { return std::getenv(name); };
  if (const char* v = get("FATHOM_MODE")) o.mode_ = parse_choice("FATHOM_MODE", v, kModes);
  if (const char* v = get("FATHOM_NVTX")) o.nvtx_ = parse_choice("FATHOM_NVTX", v, kNvtxLevels);
  if (const char* v = get("FATHOM_CUPTI")) o.cupti_ = parse_choice("FATHOM_CUPTI", v, kSwitches);
  if (const char* v = get("FATHOM_AUTOGRAD_HOOK"))
    o.autograd_hook_ = parse_choice("FATHOM_AUTOGRAD_HOOK", v, kSwitches);
  if (const char* v = get("FATHOM_COUNT_FLOPS"))
    o.count_flops_ = parse_choice("FATHOM_COUNT_FLOPS", v, kSwitches);
  if (const char* v = get("FATHOM_PRINT")) o.print_ = parse_choice("FATHOM_PRINT", v, kPrints);
  if (const char* v = get("FATHOM_CHECKPOINT_BUDGET"))
    o.checkpoint_budget_ = parse_memory_budget(v, "FATHOM_CHECKPOINT_BUDGET");
  if (const char* v = get("FATHOM_RECORD_SHAPES"))
    o.record_shapes_ = parse_choice("FATHOM_RECORD_SHAPES", v, kSwitches);
  if (const char* v = get("FATHOM_REPORT_DIR")) {
    if (!*v) throw Error("FATHOM_REPORT_DIR is empty; set it to a writable folder or unset it");
    o.report_dir_ = v;
  }
  if (const char* v = get("FATHOM_RECORD_ACTIVITY")) {
    if (!*v)
      throw Error(
          "FATHOM_RECORD_ACTIVITY is empty; set it to a file (e.g. run.jsonl.gz) or unset it");
    o.record_activity_ = v;
  }
  if (const char* v = get("FATHOM_RUN_NAME")) {
    detail::check_run_name(v, "FATHOM_RUN_NAME");
    o.run_name_ = v;
  } else if (!o.run_name_.empty()) {
    detail::check_run_name(o.run_name_, "Options::run_name (Python: run_name=)");
  }
  if (const char* v = get("FATHOM_TRACE")) {
    if (!*v)
      throw Error("FATHOM_TRACE is empty; set it to a file (e.g. run.trace.json) or unset it");
    o.trace_file_ = v;
  }
  if (const char* v = get("FATHOM_PROGRESS"))
    o.progress_ = parse_choice("FATHOM_PROGRESS", v, kProgress);
  check_no_nul(o.report_dir_, "Options::report_dir (Python: report_dir=)");
  check_no_nul(o.record_activity_, "Options::record_activity");
  check_no_nul(o.trace_file_, "Options::trace_file (Python: trace_file=)");
  if (!o.record_activity_.empty())
    check_output_path(
        o.record_activity_,
        get("FATHOM_RECORD_ACTIVITY") ? "FATHOM_RECORD_ACTIVITY" : "Options::record_activity",
        "an activity file", ".jsonl");
  if (!o.trace_file_.empty())
    check_output_path(o.trace_file_, get("FATHOM_TRACE") ? "FATHOM_TRACE" : "Options::trace_file",
                      "a trace file", ".json");
  if (o.checkpoint_budget_ && o.checkpoint_budget_->is_fraction()) {
    const double f = o.checkpoint_budget_->fraction_of_whole();
    if (!(f >= 0.01 && f <= 1))
      throw Error(
          fmt::format("Options::checkpoint_budget fraction {} is not valid; accepted: "
                      "0.01 to 1 (1 % to 100 % of device memory)",
                      f));
  } else if (o.checkpoint_budget_ && o.checkpoint_budget_->byte_count() < 1) {
    throw Error(
        fmt::format("Options::checkpoint_budget of {} bytes is not valid; accepted: at "
                    "least 1 byte, or a fraction 0.01 to 1",
                    o.checkpoint_budget_->byte_count()));
  }
  // Read by the distributed extension, but checked here: a bad value is an error at start
  // whether or not this run turns out to be distributed.
  (void)merge_timeout_from_environment(std::chrono::seconds(60));
  return o;
}

}  // namespace fathom
