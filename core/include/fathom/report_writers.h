#pragma once
// Report writers. Each takes the report model and returns text; writing it out is separate
// (atomic_file.h), so writers are tested on strings.
#include <fathom/report.h>

#include <set>
#include <string>

namespace fathom {

// The full terminal report of one epoch (the last one when epoch < 0).
std::string format_terminal_report(const RunReport& report, int epoch = -1);

// What a session prints at an epoch end by default: a few lines (step time, throughput, the top
// findings). A finding whose finding_key is in said_before (printed at an earlier epoch) is one
// line, "still true: <title>"; the keys of the findings this summary prints are added to it.
std::string format_terminal_summary(const RunReport& report, int epoch,
                                    std::set<std::string>& said_before);
// A finding's identity across epochs: its id and its fix (a new fix is news).
std::string finding_key(const Finding& f);

// The whole run as one self-contained HTML page (inline CSS, SVG charts and script; nothing is
// fetched). Every name from the report is escaped.
std::string format_html_report(const RunReport& report);

// The whole run as JSON, schema docs/report-schema.md.
std::string format_json_report(const RunReport& report);

// Reads a JSON report back (for `fathom report` and `fathom diff`). Throws fathom::Error naming
// what is wrong when the text is not a fathom report of a known schema version.
RunReport parse_json_report(const std::string& text, const std::string& source_name);

}  // namespace fathom
