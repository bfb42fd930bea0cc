// The `fathom` command. Subcommands print to stdout and exit 0, or print one line naming the
// problem to stderr and exit non-zero (2 for bad input).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include <fathom/error.h>
#include <fathom/report_writers.h>
#include <fathom/version.h>

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw fathom::Error(fmt::format("cannot open {}", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int report_command(const std::string& path, int epoch, bool json) {
  fathom::RunReport r = fathom::parse_json_report(read_file(path), path);
  if (json) {
    std::cout << fathom::format_json_report(r);
    return 0;
  }
  if (r.epochs.empty()) {
    std::cout << "fathom: " << path << " holds no ended epoch\n";
    return 0;
  }
  if (epoch >= 0) {
    std::cout << fathom::format_terminal_report(r, epoch);
    return 0;
  }
  for (std::size_t i = 0; i < r.epochs.size(); ++i)
    std::cout << fathom::format_terminal_report(r, static_cast<int>(i)) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fathom: training-side instrumentation for LibTorch"};
  app.set_version_flag("--version", std::string(fathom::kVersion));
  app.require_subcommand(1);

  std::string report_path;
  int epoch = -1;
  bool as_json = false;
  auto* report = app.add_subcommand("report", "Print a JSON report written by a fathom session");
  report->add_option("file", report_path, "the report (.json)")->required();
  report->add_option("--epoch", epoch, "only this epoch (default: every epoch)");
  report->add_flag("--json", as_json, "print the report as JSON again (validates it)");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*report) return report_command(report_path, epoch, as_json);
  } catch (const fathom::Error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  return 0;
}
