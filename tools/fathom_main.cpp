// The `fathom` command. Subcommands print to stdout; a problem with the input is one line on
// stderr naming it, and exit status 2.
#include <fathom/error.h>
#include <fathom/version.h>
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "commands.h"

namespace fathom::cli {

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open {}", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
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

  CLI11_PARSE(app, argc, argv);
  try {
    for (auto& [cmd, run] : commands)
      if (cmd->parsed()) return run();
  } catch (const fathom::Error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  return 0;
}
