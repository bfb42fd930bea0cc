#include "base/terminal_text.h"

#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include "sample_report.h"

namespace fathom {
namespace {

TEST(TerminalText, ControlCharactersAreWrittenOutVisibly) {
  EXPECT_EQ(detail::terminal_safe("a\tb\nc"), "a\tb\nc");
  EXPECT_EQ(detail::terminal_safe("k\x1b]0;pwned\x07"), "k\\x1b]0;pwned\\x07");
  EXPECT_EQ(detail::terminal_safe("\x7f"), "\\x7f");
  EXPECT_EQ(detail::terminal_safe("\xc2\x9b"
                                  "2J"),
            "\\u009b2J");                                                      // C1 CSI
  EXPECT_EQ(detail::terminal_safe("x\xe2\x80\xaey"), "x\\u202ey");             // RLO
  EXPECT_EQ(detail::terminal_safe("x\xe2\x81\xa6y"), "x\\u2066y");             // LRI
  EXPECT_EQ(detail::terminal_safe("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");  // UTF-8 stays
}

// Names fathom did not write (issue 17: `fathom report` printed them raw, escapes included) reach
// the terminal escaped, and the HTML page does not let a right-to-left override through. Both
// fail on the code before.
TEST(TerminalText, ReportsEscapeTheNamesTheyDidNotWrite) {
  RunReport r = test::sample_report();
  r.run_name = "cnn\x1b]52;c;cGF5bG9hZA==\x07";
  r.environment.device_name =
      "GPU \xe2\x80\xae"
      "evil";
  const std::string text = format_terminal_report(r);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find("\xe2\x80\xae"), std::string::npos) << text;
  EXPECT_NE(text.find("cnn\\x1b]52;c;"), std::string::npos) << text;
  const std::string html = format_html_report(r);
  EXPECT_EQ(html.find("\xe2\x80\xae"), std::string::npos);
}

// Values echoed in messages (issue 25): one line, cut at a character's start, the cut said.
TEST(TerminalText, EchoedValuesAreOneEscapedLineCutAtACharacter) {
  EXPECT_EQ(detail::echoed_value("a\tb\nc\x1b"), "a\\tb\\nc\\x1b");
  const std::string long_value = std::string(63, 'x') + "\xc3\xa9" + std::string(100, 'y');
  EXPECT_EQ(detail::echoed_value(long_value), std::string(63, 'x') + "... (165 bytes)");
  EXPECT_EQ(detail::echoed_value(std::string(64, 'z')), std::string(64, 'z'));
  const std::string path = "/data/" + std::string(300, 'p') + "/\x1b[2J";
  EXPECT_EQ(detail::printed_path(path), "/data/" + std::string(300, 'p') + "/\\x1b[2J");
}

}  // namespace
}  // namespace fathom
