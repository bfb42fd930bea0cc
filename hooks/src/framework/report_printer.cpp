#include "framework/report_printer.h"

#include <fathom/report_writers.h>

#include <cstdio>
#include <exception>

#include "base/status_line.h"
#include "base/terminal_text.h"
#include "base/warning_sink.h"

namespace fathom::detail {

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

void ReportPrinter::epoch_ended(const RunReport& report, const std::string& where) noexcept {
  if (mode_ == Print::Off || report.epochs.empty()) return;
  try {
    // The report's own text is escaped where it is made; where names the user's folder, which
    // may hold an escape sequence too.
    if (mode_ == Print::Full) {
      emit(format_terminal_report(report) + terminal_safe(where));
      return;
    }
    emit(format_terminal_summary(report, -1, said_) + terminal_safe(where) +
         "  the full report: FATHOM_PRINT=full, or at the end of the run\n");
  } catch (const std::exception& e) {
    detail::warn("terminal report failed: ", e.what());
  }
}

void ReportPrinter::session_ended(const RunReport& report, const std::string& where) noexcept {
  if (mode_ == Print::Off || report.epochs.empty()) return;
  try {
    emit(mode_ == Print::Summary ? format_terminal_report(report) + terminal_safe(where)
                                 : terminal_safe(where));
  } catch (const std::exception& e) {
    detail::warn("terminal report failed: ", e.what());
  }
}

}  // namespace fathom::detail
