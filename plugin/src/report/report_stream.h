#pragma once
// The whole-run report writers, a piece at a time: the epochs come from a visitor, so a session's
// end can take its early epochs from the journal on disk and the rest from memory, holding one
// epoch at a time, and the text goes into a sink (a file, through AtomicFileWriter) instead of one
// string (issue 24: the session's end held the whole run as text and as a tree). The same bytes
// as format_json_report and format_html_report, which are these writers into a string.
#include <fathom/report.h>

#include <functional>
#include <string_view>
#include <vector>

#include "base/atomic_file.h"
#include "report/report_html_parts.h"

namespace fathom::detail {

// Calls its argument with each of the run's ended epochs, in order. The HTML writer visits twice
// (the run's overview before the epochs' panels).
using EachEpoch = std::function<void(const std::function<void(const EpochSummary&)>&)>;

// What the page's overview reads of every epoch (a few numbers each, and the last epoch's top
// findings), gathered before the epochs' panels are written: by write_html_report's own first
// visit, or by the caller while it visits the epochs for the JSON (one visit fewer, so a session's
// end reads its journal back twice, not three times).
struct HtmlOverview {
  void add(const EpochSummary& e);
  std::vector<html_report::EpochDigest> digests;
  std::vector<Finding> top;
};

// head: the run's name, schema version and environment; its epochs are not read.
void write_json_report(const RunReport& head, const EachEpoch& epochs, TextSink& out);
// overview: every epoch already added to it, in order; null to gather it here.
void write_html_report(const RunReport& head, const EachEpoch& epochs, TextSink& out,
                       HtmlOverview* overview = nullptr);

// One line of the journal (format_journal_epoch) read back as its epoch. Throws fathom::Error
// naming source_name when the line is not one.
EpochSummary parse_journal_epoch(std::string_view line, const std::string& source_name);

}  // namespace fathom::detail
