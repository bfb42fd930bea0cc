// The `fathom` command. Subcommands print to stdout; a problem with the input (a file, an option)
// is one line on stderr naming it, and exit status 2; 1 is a gate that failed (doctor, diff).
#include <fathom/error.h>
#include <fathom/version.h>
#include <fmt/format.h>

#include <iostream>
#include <vector>

#include "commands.h"
#include "formats/gz_file.h"

namespace fathom::cli {

std::string read_whole_file(const std::string& path) {
  // Regular files only, and at most a report's size (a .gz is read through): `fathom report
  // /dev/zero` is an error, not an allocation until the process dies.
  detail::InputFile in(path, detail::kMaxReportBytes, detail::Content::Json);
  return in.read_all();
}

}  // namespace fathom::cli

int main(int argc, char** argv) {
  CLI::App app{"fathom: training-side instrumentation for LibTorch"};
  app.set_version_flag("--version", std::string(fathom::kVersion));
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, fathom::cli::Run>> commands;
  auto add = [&](fathom::cli::Run run) {
    commands.emplace_back(app.get_subcommands({}).back(), std::move(run));
  };
  add(fathom::cli::add_report_command(app));
  add(fathom::cli::add_doctor_command(app));
  add(fathom::cli::add_diff_command(app));
  add(fathom::cli::add_analyze_command(app));

  // A bad command line is bad input like a bad file: exit 2 (CLI11's own codes run past 100).
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    return status == 0 ? 0 : 2;
  }
  try {
    for (auto& [cmd, run] : commands)
      if (cmd->parsed()) return run();
  } catch (const fathom::Error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  return 0;
}
