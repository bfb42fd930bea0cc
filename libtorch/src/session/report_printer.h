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

  // The report's last epoch just ended; its files are at json_path (written: they are there).
  void epoch_ended(const RunReport& report, const std::string& json_path, bool written) noexcept;
  // The session ends: in Summary mode, the full report of its last epoch.
  void session_ended(const RunReport& report, const std::string& json_path) noexcept;

 private:
  void emit(std::string_view text);

  Print mode_;
  PrintHandler to_;
  std::set<std::string> said_;  // finding_key of every finding a summary printed
  bool written_ = false;        // the latest report files are on disk
};

}  // namespace fathom::detail
