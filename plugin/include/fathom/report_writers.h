#pragma once
// Report writers. Each takes the report model and returns text; writing it out is separate
// (atomic_file.h), so writers are tested on strings.
#include <fathom/gpu_summary.h>
#include <fathom/job_report.h>
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

// The GPU section (gpu_summary.h) alone, as the report writers put it in an epoch (terminal text; a
// JSON object).
std::string format_gpu_summary_text(const GpuSummary& s);
std::string format_gpu_summary_json(const GpuSummary& s);
// Throws fathom::Error naming source_name and the problem.
GpuSummary parse_gpu_summary_json(const std::string& text, const std::string& source_name);

// What `fathom analyze` writes: {"schema": "fathom.analysis", "schema_version", "input", "gpu",
// "devices", "findings", "nsight"} (docs/report-schema.md); this writes the first four.
inline constexpr int kAnalysisSchemaVersion = 2;
std::string format_gpu_analysis_json(const GpuSummary& s, const std::string& input_path);

// The job report rank 0 writes (job_report.h).
std::string format_job_json(const JobReport& report);
// The terminal view of one epoch (the last when epoch < 0); long tables show the slowest and
// fastest ranks and say how many were left out.
std::string format_job_terminal(const JobReport& report, int epoch = -1);

}  // namespace fathom
