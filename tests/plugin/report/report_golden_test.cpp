// Golden-file tests of the terminal and JSON writers on recorded runs (tests/plugin/golden).
// After an intended change to the output, regenerate the expected files with
//   FATHOM_UPDATE_GOLDEN=1 ctest --test-dir <build> -R ReportGolden
// and review the diff of tests/plugin/golden/ before committing it.
#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "advise/advisor.h"
#include "golden_reports.h"

namespace fathom {
namespace {

struct GoldenCase {
  const char* input;        // a recorded run (.report.json)
  bool recompute_findings;  // synthetic inputs: the golden output also pins the advisor
};

constexpr GoldenCase kCases[] = {
    {"cpu_cnn_batch16", false},
    {"cpu_cnn_batch64", false},
    {"synthetic_h100", true},
};

bool updating() {
  const char* v = std::getenv("FATHOM_UPDATE_GOLDEN");
  return v && std::string(v) == "1";
}

// The first line that differs, to make a failure readable.
std::string first_difference(const std::string& expected, const std::string& actual) {
  std::istringstream e(expected), a(actual);
  std::string le, la;
  for (int line = 1;; ++line) {
    const bool more_e = static_cast<bool>(std::getline(e, le));
    const bool more_a = static_cast<bool>(std::getline(a, la));
    if (!more_e && !more_a) return "equal";
    if (le != la || more_e != more_a)
      return "line " + std::to_string(line) + "\n  expected: " + (more_e ? le : "<end>") +
             "\n  actual:   " + (more_a ? la : "<end>");
  }
}

void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = test::golden_path(name);
  if (updating()) {
    std::ofstream(path, std::ios::binary) << actual;
    std::cout << "updated " << path << "\n";
    return;
  }
  const std::string expected = test::read_text(path);
  ASSERT_FALSE(expected.empty()) << path
                                 << " is missing: run with FATHOM_UPDATE_GOLDEN=1 to create it";
  EXPECT_TRUE(expected == actual)
      << name << " differs at " << first_difference(expected, actual)
      << "\n(regenerate with FATHOM_UPDATE_GOLDEN=1 if the change is intended)";
}

RunReport load(const GoldenCase& c) {
  RunReport r = test::golden_report(std::string(c.input) + ".report.json");
  if (c.recompute_findings)
    for (EpochSummary& e : r.epochs) e.findings = advise(e, r.environment);
  return r;
}

class ReportGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(ReportGolden, Terminal) {
  const RunReport r = load(GetParam());
  std::string text;
  for (std::size_t i = 0; i < r.epochs.size(); ++i)
    text += format_terminal_report(r, static_cast<int>(i)) + "\n";
  check_golden(std::string(GetParam().input) + ".terminal.txt", text);
}

TEST_P(ReportGolden, Json) {
  const RunReport r = load(GetParam());
  const std::string text = format_json_report(r);
  check_golden(std::string(GetParam().input) + ".expected.json", text);
  // What is written reads back to the same text.
  EXPECT_EQ(format_json_report(parse_json_report(text, "golden")), text);
}

INSTANTIATE_TEST_SUITE_P(Recorded, ReportGolden, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.input); });

}  // namespace
}  // namespace fathom
