// A report as `fathom report` and `fathom diff` read it, then every writer and the diff on what
// was read: a result or a fathom::Error, nothing else.
#include <fathom/error.h>
#include <fathom/report_diff.h>
#include <fathom/report_writers.h>

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const fathom::RunReport r = fathom::parse_json_report(text, "fuzz.json");
    (void)fathom::format_terminal_report(r);
    (void)fathom::format_json_report(r);
    (void)fathom::format_html_report(r);
    (void)fathom::format_diff(fathom::diff_reports(r, r, -1, -1), 0.02);
  } catch (const fathom::Error&) {
    // The one way a reader may refuse its input.
  }
  return 0;
}
