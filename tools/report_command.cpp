// fathom report FILE.json: prints a report written by a session (terminal, or JSON again), or
// writes it as a self-contained HTML page (--html OUT). FILE.json, or the journal FILE.jsonl a
// running or killed session left (read_report_file).
#include <fathom/error.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "base/command_output.h"
#include "commands.h"

namespace fathom::cli {
namespace {

struct ReportArgs {
  std::string path;
  int epoch = -1;
  bool json = false;
  std::string html;
};

int run_report(const ReportArgs& a) {
  // The report may be read from the journal beside a .json name: neither is a place for the page.
  const std::vector<std::string> inputs = {a.path, a.path + "l"};
  if (!a.html.empty()) check_command_output(a.html, "--html", inputs);
  RunReport r = read_report_file(a.path);
  if (!a.html.empty()) {
    write_command_output(a.html, "--html", format_html_report(r), inputs);
    std::cout << "fathom: wrote " << a.html << " (" << r.epochs.size() << " epochs)\n";
    return 0;
  }
  if (a.json) {
    std::cout << format_json_report(r);
    return 0;
  }
  if (r.epochs.empty()) {
    // Asked for an epoch that is not there: bad input, exit 2, as for one past the last.
    if (a.epoch >= 0)
      throw Error(fmt::format("{} has no epoch {}; it holds no ended epoch", a.path, a.epoch));
    std::cout << "fathom: " << a.path << " holds no ended epoch\n";
    return 0;
  }
  if (a.epoch >= 0) {
    if (static_cast<std::size_t>(a.epoch) >= r.epochs.size())
      throw Error(fmt::format("{} has no epoch {}; it has epochs 0 to {}", a.path, a.epoch,
                              r.epochs.size() - 1));
    std::cout << format_terminal_report(r, a.epoch);
    return 0;
  }
  for (std::size_t i = 0; i < r.epochs.size(); ++i)
    std::cout << format_terminal_report(r, static_cast<int>(i)) << "\n";
  return 0;
}

}  // namespace

Run add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand(
      "report", "Print a JSON report written by a fathom session, or write it as HTML");
  cmd->add_option("file", args->path, "the report (.json, or a live or killed run's .jsonl)")
      ->required();
  cmd->add_option("--epoch", args->epoch, "only this epoch (default: every epoch)")
      ->check(CLI::NonNegativeNumber);
  auto* json = cmd->add_flag("--json", args->json, "print the report as JSON again (validates it)");
  cmd->add_option("--html", args->html,
                  "write a self-contained HTML report (charts, no network) to this file")
      ->excludes(json);
  return [args] { return run_report(*args); };
}

}  // namespace fathom::cli
