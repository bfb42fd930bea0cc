// fathom diff A.json B.json: what changed between two runs and by how much. Exit status 0, or 1
// with --fail-if-slower PCT when B's mean step time is more than PCT percent above A's.
#include <fathom/report_diff.h>
#include <fathom/report_writers.h>

#include <cmath>
#include <iostream>
#include <memory>

#include "commands.h"

namespace fathom::cli {
namespace {

struct DiffArgs {
  std::string a, b;
  int epoch_a = -1, epoch_b = -1;
  double noise_pct = 2.0;
  double fail_if_slower_pct = -1;
};

int run_diff(const DiffArgs& args) {
  const RunReport a = parse_json_report(read_whole_file(args.a), args.a);
  const RunReport b = parse_json_report(read_whole_file(args.b), args.b);
  const ReportDiff d = diff_reports(a, b, args.epoch_a, args.epoch_b);
  std::cout << format_diff(d, args.noise_pct / 100.0);
  if (args.fail_if_slower_pct < 0) return 0;
  for (const MetricChange& m : d.metrics) {
    if (m.name != "step time, mean") continue;
    const auto r = m.relative();
    if (r && *r * 100.0 > args.fail_if_slower_pct) {
      std::cout << "fathom: B's step time is " << *r * 100.0 << " % above A's (limit "
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
      "diff", "Compare two JSON reports: step time, throughput, phases, memory, findings");
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
