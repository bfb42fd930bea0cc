#include <fathom/error.h>
#include <fathom/options.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <utility>

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
constexpr Choices<bool, 8> kSwitches{{{"on", true},
                                      {"off", false},
                                      {"1", true},
                                      {"0", false},
                                      {"true", true},
                                      {"false", false},
                                      {"yes", true},
                                      {"no", false}}};

// Every variable fathom reads. An unknown FATHOM_* name is an error: a typo must not silently
// leave a setting at its default.
constexpr std::array<std::string_view, 9> kKnownVariables{
    "FATHOM_MODE",          "FATHOM_REPORT_DIR", "FATHOM_RUN_NAME", "FATHOM_NVTX",
    "FATHOM_RECORD_SHAPES", "FATHOM_CUPTI",      "FATHOM_PRINT",    "FATHOM_CHECKPOINT_BUDGET",
    "FATHOM_MERGE_TIMEOUT"};  // FATHOM_MERGE_TIMEOUT: read by rank_info.cpp

template <typename T, std::size_t N>
T parse_choice(const char* variable, std::string_view value, const Choices<T, N>& choices) {
  for (const auto& [name, v] : choices) {
    if (name == value) return v;
  }
  std::string accepted;
  for (const auto& [name, v] : choices) {
    accepted += accepted.empty() ? "" : "|";
    accepted += name;
  }
  throw Error(fmt::format("{}='{}' is not valid; accepted values: {}", variable, value, accepted));
}

template <typename T, std::size_t N>
std::string_view name_of(T v, const Choices<T, N>& choices) noexcept {
  for (const auto& [name, c] : choices) {
    if (c == v) return name;
  }
  return "?";
}

void reject_unknown_variables() {
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    if (entry.substr(0, 7) != "FATHOM_") continue;
    std::string_view name = entry.substr(0, entry.find('='));
    if (std::find(kKnownVariables.begin(), kKnownVariables.end(), name) != kKnownVariables.end())
      continue;
    std::string known;
    for (auto k : kKnownVariables) known += fmt::format("{}{}", known.empty() ? "" : ", ", k);
    throw Error(fmt::format("unknown environment variable {}; fathom reads: {}", name, known));
  }
}

}  // namespace

std::string_view mode_name(Mode m) noexcept { return name_of(m, kModes); }
std::string_view nvtx_level_name(NvtxLevel l) noexcept { return name_of(l, kNvtxLevels); }

Options Options::with_env() const {
  reject_unknown_variables();
  Options o = *this;
  auto get = [](const char* name) -> const char* { return std::getenv(name); };
  if (const char* v = get("FATHOM_MODE")) o.mode_ = parse_choice("FATHOM_MODE", v, kModes);
  if (const char* v = get("FATHOM_NVTX")) o.nvtx_ = parse_choice("FATHOM_NVTX", v, kNvtxLevels);
  if (const char* v = get("FATHOM_CUPTI")) o.cupti_ = parse_choice("FATHOM_CUPTI", v, kSwitches);
  if (const char* v = get("FATHOM_PRINT")) o.print_report_ = parse_choice("FATHOM_PRINT", v, kSwitches);
  if (const char* v = get("FATHOM_CHECKPOINT_BUDGET"))
    o.checkpoint_budget_ = parse_memory_budget(v, "FATHOM_CHECKPOINT_BUDGET");
  if (const char* v = get("FATHOM_RECORD_SHAPES"))
    o.record_shapes_ = parse_choice("FATHOM_RECORD_SHAPES", v, kSwitches);
  if (const char* v = get("FATHOM_REPORT_DIR")) {
    if (!*v) throw Error("FATHOM_REPORT_DIR is empty; set it to a writable folder or unset it");
    o.report_dir_ = v;
  }
  if (const char* v = get("FATHOM_RUN_NAME")) {
    if (!*v || std::strchr(v, '/'))
      throw Error(fmt::format("FATHOM_RUN_NAME='{}' must be a non-empty file name without '/'", v));
    o.run_name_ = v;
  }
  return o;
}

}  // namespace fathom
