// Which file holds a run's report: the document a session writes at its end, or the journal it
// appends to while it runs (and leaves behind when it is killed).
#include <fathom/report_writers.h>

#include <string>

#include "base/file_system.h"
#include "formats/gz_file.h"

namespace fathom {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string read_all(const std::string& path) {
  // Regular files only, and at most a report's size: /dev/zero is an error, not an allocation
  // until the process dies.
  detail::InputFile in(path, detail::kMaxReportBytes, detail::Content::Json);
  return in.read_all();
}

}  // namespace

RunReport read_report_file(const std::string& path) {
  if (ends_with(path, ".jsonl")) return parse_report_journal(read_all(path), path);
  if (ends_with(path, ".json") && !fs::exists(path)) {
    const std::string journal = path + "l";
    if (fs::exists(journal)) return parse_report_journal(read_all(journal), journal);
  }
  return parse_json_report(read_all(path), path);
}

}  // namespace fathom
