#pragma once
// The pieces of the HTML report that its files share (report_html.cpp: the page, the stats and
// the findings; report_html_charts.cpp: the SVG charts; report_html_tables.cpp: the tables).
#include <fathom/gpu_summary.h>
#include <fathom/report.h>
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace fathom::html_report {

inline constexpr const char* kPhaseColors[kPhaseCount] = {"#9c9c9c", "#f2a541", "#4e79a7",
                                                          "#e15759", "#59a14f"};
inline constexpr const char* kOutsideColor = "#d9d9d9";

inline std::string pct(double fraction) { return fmt::format("{:.1f} %", 100 * fraction); }

// The reason a report gives for something it did not measure.
inline std::string why_not(const Environment& env, UnmeasuredId id, std::string fallback) {
  for (const Unmeasured& u : env.not_measured)
    if (u.id == id) return u.what + ": " + u.why;
  return fallback;
}

// The GPU section of an epoch, when the report has one.
inline const GpuSummary* gpu_of(const EpochSummary& e) { return e.gpu ? &*e.gpu : nullptr; }

inline void row(std::string& out, std::initializer_list<std::string> cells) {
  out += "<tr>";
  bool first = true;
  for (const std::string& c : cells) {
    out += first ? "<td class=\"text\">" : "<td>";
    out += c;  // already escaped by the caller
    out += "</td>";
    first = false;
  }
  out += "</tr>";
}

inline void table_head(std::string& out, std::initializer_list<const char*> heads,
                       bool sortable = true) {
  out += sortable ? "<table class=\"sortable\"><thead><tr>" : "<table><thead><tr>";
  for (const char* h : heads) fmt::format_to(std::back_inserter(out), "<th>{}</th>", h);
  out += "</tr></thead><tbody>";
}

// What the run's overview and its charts read of each epoch: a few numbers, so that the page of a
// long run is written holding one epoch at a time (report_stream.h), not the run.
struct EpochDigest {
  struct PhaseDigest {  // at the position of EpochSummary::phases it was made from
    Phase phase = Phase::Data;
    std::int64_t count = 0;
    double wall_ms_total = 0;
    std::optional<std::int64_t> peak_allocated_bytes;  // of the device; none when not measured
    std::optional<std::int64_t> rss_bytes_max;
  };
  std::int64_t index = 0;
  std::int64_t last_index = 0;  // a chart's bar of several epochs (epoch_bars) covers index..last
  std::int64_t steps = 0;
  double samples_per_second = 0;
  double step_ms_mean = 0;
  double step_ms_max = 0;
  double step_ms_total = 0;
  std::size_t findings = 0;
  std::array<PhaseDigest, kPhaseCount> phases{};
};
EpochDigest digest_of(const EpochSummary& e);

// The run-wide charts draw at most this many bars: a bar is a few pixels wide by then, and a long
// run's charts (10,000 epochs: 60,000 rects, about 30 MiB of SVG built at the session's end) stay a
// fixed size.
inline constexpr std::size_t kMaxEpochBars = 120;
// The epochs as a chart draws them: each one, or up to max_bars runs of consecutive epochs merged
// (steps, phase counts and times summed; peaks the highest), so a bar's per-step figures are the
// mean over its steps.
std::vector<EpochDigest> epoch_bars(const std::vector<EpochDigest>& epochs,
                                    std::size_t max_bars = kMaxEpochBars);

// Charts (report_html_charts.cpp).
std::string step_time_chart(const std::vector<EpochDigest>& epochs);

std::string memory_chart(const std::vector<EpochDigest>& epochs, const Environment& env);

std::string tensor_core_chart(const EpochSummary& e, const Environment& env);

std::string transfer_chart(const EpochSummary& e, const Environment& env);

std::string busy_chart(const EpochSummary& e, const Environment& env);
// The step series: step time with its change point, memory per step with its creep.
std::string step_series_charts(const EpochSummary& e);

// Tables (report_html_tables.cpp).
std::string phase_table(const EpochSummary& e);

std::string copies_table(const EpochSummary& e);

std::string top_kernels_table(const EpochSummary& e);

std::string telemetry_table(const EpochSummary& e);
// FLOPs, throughput, MFU and energy (achievement.h).
std::string achievement_table(const EpochSummary& e);

std::string hardware_fit_table(const EpochSummary& e, const Environment& env);

}  // namespace fathom::html_report
