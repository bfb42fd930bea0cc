// fathom diff A.json B.json: what changed between two runs and by how much: two reports, or two
// analyses (`fathom analyze --json`). Exit status 0, or 1 with --fail-if-slower PCT when B's mean
// step time (an analysis: its compute-kernel time) is more than PCT percent above A's.
#include <fathom/error.h>
#include <fathom/report_diff.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <memory>

#include "base/file_system.h"
#include "commands.h"
#include "report/analysis_json.h"

namespace fathom::cli {
namespace {

struct DiffArgs {
  std::string a, b;
  int epoch_a = -1, epoch_b = -1;
  double noise_pct = 2.0;
  double fail_if_slower_pct = -1;
};

// Two analyses: their GPU sections (and each device's, for multi-GPU exports) and findings.
ReportDiff diff_analyses(const AnalysisDocument& a, const AnalysisDocument& b) {
  ReportDiff d;
  d.name_a = a.input;
  d.name_b = b.input;
  d.metrics = diff_gpu_summaries(a.gpu, b.gpu);
  d.findings = diff_findings(a.findings, b.findings);
  return d;
}

int finish_diff(const ReportDiff& d, const DiffArgs& args, bool analysis);

// A running or killed session's journal (`X.jsonl`, or `X.json` not there yet) is a report too.
bool is_report_journal(const std::string& path) {
  if (path.ends_with(".jsonl")) return true;
  return path.ends_with(".json") && !fs::exists(path) && fs::exists(path + "l");
}

int run_diff(const DiffArgs& args) {
  if (is_report_journal(args.a) || is_report_journal(args.b)) {
    const ReportDiff d = diff_reports(read_report_file(args.a), read_report_file(args.b),
                                      args.epoch_a, args.epoch_b);
    return finish_diff(d, args, /*analysis=*/false);
  }
  const std::string ta = read_whole_file(args.a), tb = read_whole_file(args.b);
  const bool analysis_a = is_analysis_json(ta), analysis_b = is_analysis_json(tb);
  if (analysis_a != analysis_b)
    throw Error(
        fmt::format("cannot compare {} with {}: one is a report, the other an analysis "
                    "(`fathom analyze --json`); give two of a kind",
                    args.a, args.b));
  ReportDiff d;
  if (analysis_a) {
    if (args.epoch_a >= 0 || args.epoch_b >= 0)
      throw Error("--epoch-a and --epoch-b are for reports: an analysis has no epochs");
    d = diff_analyses(parse_analysis_json(ta, args.a), parse_analysis_json(tb, args.b));
  } else {
    d = diff_reports(parse_json_report(ta, args.a), parse_json_report(tb, args.b), args.epoch_a,
                     args.epoch_b);
  }
  return finish_diff(d, args, analysis_a);
}

// Prints the diff and applies the --fail-if-slower gate: the exit status.
int finish_diff(const ReportDiff& d, const DiffArgs& args, bool analysis) {
  std::cout << format_diff(d, args.noise_pct / 100.0);
  if (args.fail_if_slower_pct < 0) return 0;
  const char* gate = analysis ? "compute-kernel time" : "step time, mean";
  const char* said = analysis ? "compute-kernel time" : "step time";
  for (const MetricChange& m : d.metrics) {
    if (m.name != gate) continue;
    const auto r = m.relative();
    if (r && *r * 100.0 > args.fail_if_slower_pct) {
      std::cout << "fathom: B's " << said << " is " << *r * 100.0 << " % above A's (limit "
                << args.fail_if_slower_pct << " %)\n";
      return 1;
    }
  }
  return 0;
}

// A percentage: finite and not negative. CLI::NonNegativeNumber lets nan through, and a gate set
// to nan could never fail.
const CLI::Validator kPercent(
    [](std::string& text) -> std::string {
      double v = 0;
      if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v) || v < 0)
        return "a percentage is a finite number >= 0, e.g. 5; not " + text;
      return "";
    },
    "PERCENT");

}  // namespace

Run add_diff_command(CLI::App& app) {
  auto args = std::make_shared<DiffArgs>();
  auto* cmd = app.add_subcommand(
      "diff",
      "Compare two JSON reports (step time, throughput, phases, memory, findings) or two analyses");
  cmd->add_option("a", args->a, "the earlier report (.json)")->required();
  cmd->add_option("b", args->b, "the later report (.json)")->required();
  cmd->add_option("--epoch-a", args->epoch_a, "epoch of A (default: its last)");
  cmd->add_option("--epoch-b", args->epoch_b, "epoch of B (default: its last)");
  cmd->add_option("--noise", args->noise_pct, "changes below this many percent count as unchanged")
      ->capture_default_str()
      ->check(kPercent);
  cmd->add_option("--fail-if-slower", args->fail_if_slower_pct,
                  "exit 1 when B's mean step time is more than this many percent above A's")
      ->check(kPercent);
  return [args] { return run_diff(*args); };
}

}  // namespace fathom::cli
