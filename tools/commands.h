#pragma once
// Each subcommand of `fathom` lives in its own file and registers itself here. A command's
// run function returns the process exit status: 0 success, 1 "found a problem" (doctor,
// diff thresholds), 2 bad input (a file that is not what it should be).
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace fathom::cli {

using Run = std::function<int()>;

// Adds the subcommand to app and returns what runs it when it was chosen.
Run add_report_command(CLI::App& app);
Run add_doctor_command(CLI::App& app);
Run add_diff_command(CLI::App& app);
Run add_analyze_command(CLI::App& app);

std::string read_whole_file(const std::string& path);  // throws fathom::Error naming the path

}  // namespace fathom::cli
