#pragma once
// What a session prints (Options::print, FATHOM_PRINT): a compact summary at each epoch end and
// the full report once when the session ends, or the full report at each epoch end, or nothing.
// Printing is apart from writing the report files (SessionState::write_report): it reads the
// report only, and a failure here is a warning, never the training's.
#include <fathom/options.h>
#include <fathom/report.h>

#include <set>
#include <string>
#include <string_view>

namespace fathom::detail {

class ReportPrinter {
 public:
  explicit ReportPrinter(const Options& options);

  // The report's last epoch just ended; where: the line that says where its file is (or that it
  // is not written), made by the session, which knows what the report writer did.
  void epoch_ended(const RunReport& report, const std::string& where) noexcept;
  // The session ends: in Summary mode the full report of its last epoch, then where the whole
  // run's files are (in Full mode that line alone).
  void session_ended(const RunReport& report, const std::string& where) noexcept;

 private:
  void emit(std::string_view text);

  Print mode_;
  PrintHandler to_;
  std::set<std::string> said_;  // finding_key of every finding a summary printed
};

}  // namespace fathom::detail
