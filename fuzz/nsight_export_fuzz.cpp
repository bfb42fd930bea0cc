// An Nsight Systems SQLite export, analyzed as `fathom analyze RUN.sqlite` does (every pass, the
// advisor, the terminal, JSON and HTML writers, the analysis read back): a result or a
// fathom::Error, nothing else. SQLite itself refuses a malformed file; what is fuzzed is what
// fathom does with the rows a well-formed file holds.
#include <fathom/error.h>
#include <fathom/report_writers.h>

#include "advise/export_analysis.h"
#include "fuzz_input.h"
#include "report/analysis_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const std::string& path = fathom::fuzz::as_file(data, size);
    const fathom::ExportAnalysis x = fathom::analyze_nsight_export(path, {});
    (void)fathom::format_terminal_report(x.report);
    (void)fathom::format_html_report(x.report);
    const fathom::EpochSummary& e = x.report.epochs.front();
    const std::string json =
        fathom::format_analysis_json({path, *e.gpu, x.devices, e.findings, x.info});
    (void)fathom::parse_analysis_json(json, "fuzz.analysis.json");
  } catch (const fathom::Error&) {
    // The one way a reader may refuse its input.
  }
  return 0;
}
