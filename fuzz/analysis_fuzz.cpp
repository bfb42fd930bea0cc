// An analysis (`fathom analyze --json`) as `fathom diff` reads it, then the diff of it with itself
// and its terminal form: a result or a fathom::Error, nothing else.
#include <fathom/error.h>
#include <fathom/report_diff.h>

#include <string>

#include "report/analysis_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const std::string text(reinterpret_cast<const char*>(data), size);
    (void)fathom::is_analysis_json(text);
    const fathom::AnalysisDocument d = fathom::parse_analysis_json(text, "fuzz.json");
    fathom::ReportDiff diff;
    diff.metrics = fathom::diff_gpu_summaries(d.gpu, d.gpu);
    diff.findings = fathom::diff_findings(d.findings, d.findings);
    (void)fathom::format_diff(diff, 0.02);
    (void)fathom::format_analysis_json(d);
  } catch (const fathom::Error&) {
    // The one way a reader may refuse its input.
  }
  return 0;
}
