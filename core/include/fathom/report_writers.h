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

// The live report a session keeps while it runs, `<run>.jsonl` (docs/report-schema.md, "report
// journal"): a header line, then one line per ended epoch, each written once and appended, so an
// epoch's end costs the same at epoch 500 as at epoch 1. At the session's end the whole run is
// written once as `<run>.json` and the journal removed; a killed run leaves the journal.
std::string format_journal_header(const RunReport& report);
std::string format_journal_epoch(const EpochSummary& epoch, const Environment& environment);
// The report the journal's complete lines hold (a last line a kill cut short is left out).
// Throws fathom::Error naming the line when the text is not a fathom report journal.
RunReport parse_report_journal(const std::string& text, const std::string& source_name);

// Reads a report from disk, whichever form the run left: `X.jsonl` is read as a journal; `X.json`
// as a document, or, when it is not there (the run is still going, or was killed), from the
// journal `X.jsonl` beside it. Throws fathom::Error naming the path.
RunReport read_report_file(const std::string& path);

}  // namespace fathom
