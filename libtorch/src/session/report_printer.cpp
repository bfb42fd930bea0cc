#include "session/report_printer.h"

#include <fathom/report_writers.h>

#include <cstdio>
#include <exception>

#include "records/status_line.h"
#include "records/warning_sink.h"

namespace fathom::detail {
namespace {

std::string where(const std::string& json_path, bool written) {
  // Only files that are there: a lost report was a warning already.
  if (!written) return "  report: not written (see fathom's warning)\n";
  const std::string html = json_path.substr(0, json_path.size() - 5) + ".html";
  // Plain strings: the LibTorch layer does not link fmt (LibTorch bundles its own).
  return "  report: " + json_path + " (for tools), " + html + " (for people)\n";
}

}  // namespace

ReportPrinter::ReportPrinter(const Options& options)
    : mode_(options.print()), to_(options.print_to()) {}

void ReportPrinter::emit(std::string_view text) {
  if (to_) {
    to_(text);
    return;
  }
  // The program's own output first, then a line of ours on standard error: a progress line the
  // program left without a newline is ended, not continued by fathom's text.
  std::fflush(stdout);
  const detail::StatusLinePause pause;  // the progress line, if drawn, is not written over
  std::fputc('\n', stderr);
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

void ReportPrinter::epoch_ended(const RunReport& report, const std::string& json_path,
                                bool written) noexcept {
  written_ = written;
  if (mode_ == Print::Off || report.epochs.empty()) return;
  try {
    if (mode_ == Print::Full) {
      emit(format_terminal_report(report) + where(json_path, written));
      return;
    }
    emit(format_terminal_summary(report, -1, said_) + where(json_path, written) +
         "  the full report: FATHOM_PRINT=full, or at the end of the run\n");
  } catch (const std::exception& e) {
    detail::warn("terminal report failed: ", e.what());
  }
}

void ReportPrinter::session_ended(const RunReport& report, const std::string& json_path) noexcept {
  if (mode_ != Print::Summary || report.epochs.empty()) return;
  try {
    emit(format_terminal_report(report) + where(json_path, written_));
  } catch (const std::exception& e) {
    detail::warn("terminal report failed: ", e.what());
  }
}

}  // namespace fathom::detail
